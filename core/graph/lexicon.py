"""The words the extractor knows, in one place: the verbs of each relation, the tools and their
categories, preferences, role nouns, and the words that are never names (acknowledgements,
fillers, weekdays, holidays). The patterns are built from these lists, so a new phrasing is a
new word here, not a new regex."""

from __future__ import annotations

from typing import Final


def _words(text: str) -> tuple[str, ...]:
    return tuple(w for w in text.split() if w)


def _phrases(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


# -- verbs per relation (every form a writer may use, tense is judged separately) -------------

AUX: Final = _words(
    "am is are was were be been being 'm 's 're have has had 've 'd do does did will 'll "
    "would shall should can could may might must just now also still already recently finally "
    "officially currently actually really happily basically since then eventually already"
)
"""Auxiliaries and adverbs that may stand between a subject and its verb."""

LIVE_VERBS: Final = _phrases(
    "live, lives, lived, living, reside, resides, resided, residing, stay, stays, staying, "
    "settled, settle, based, located, moved, move, moves, moving, relocated, relocate, "
    "relocating, relocates, moved back, moving back, moved over, emigrated, immigrated, "
    "now live, am living, be living"
)
LIVE_PREPS: Final = _phrases("in, to, at, near, from, out of")
"""'from' starts "from A to B"; 'out of' ends where someone lived."""

WORK_VERBS: Final = _phrases(
    "work, works, worked, working, employed, joined, join, joins, joining, started, start, "
    "starts, starting, hired, am hired, got hired, got a job, took a job, take a job, "
    "accepted a job, accepted an offer, landed a job, have a job, got a position, "
    "took a position, work full-time, work part-time, intern, interning, interned, "
    "am an intern, contracting, consulting"
)
WORK_PREPS: Final = _words("at for")
JOIN_VERBS: Final = _phrases("joined, join, joins, joining")
"""Verbs whose object follows with no preposition ("I joined Globex")."""

LEAVE_VERBS: Final = _phrases(
    "left, leave, leaving, quit, quitting, resigned from, resign from, resigning from, "
    "was laid off from, got laid off from, laid off from, was fired from, got fired from, "
    "fired from, moved on from, moved out of, move out of, moving out of, moved away from, "
    "walked away from, retired from, stepped down from, dropped, drop, dropped out of, "
    "stopped using, stop using, got rid of, moved off, moved off of, migrated off, "
    "migrated away from, ditched, abandoned, gave up, gave up on, stopped drinking, "
    "stopped working at, stopped working for"
)
NEGATION_CUES: Final = _phrases("no longer, anymore, any more, nolonger, no more, never again")
"""Anywhere in a clause, these end what it states ("I don't live there anymore")."""

REPORT_VERBS: Final = _phrases(
    "report to, reports to, reporting to, reported to, work under, works under, working under, "
    "worked under"
)
MANAGER_NOUNS: Final = _phrases(
    "manager, boss, supervisor, line manager, direct manager, team manager, engineering manager,"
    " reporting manager, superior, chef"
)
"""'my manager is X': the owner reports to X."""
TEAM_LEAD_NOUNS: Final = _phrases("team lead, team leader, tech lead, lead, teamlead")
"""'X is our team lead': the lead of the owner's team."""

USE_VERBS: Final = _phrases(
    "use, uses, used, using, run on, runs on, running on, ran on, built on, is built on, "
    "built with, is built with, rely on, relies on, relying on, depend on, depends on, "
    "switched to, switch to, switching to, migrated to, migrate to, migrating to, moved to, "
    "moving to, went with, go with, chose, picked, adopted, standardised on, standardized on, "
    "settled on, are on, is on, deployed on, deploy on, deploys on, hosted on, host on, "
    "hosts on, stores data in, store data in, keeps data in, now use, now uses"
)
MIGRATE_VERBS: Final = _phrases(
    "moved, migrated, switched, ported, converted, moving, migrating, switching, porting"
)
"""'we moved Ledgerly to Postgres': a project's tool changes."""

LEAD_VERBS: Final = _phrases(
    "lead, leads, led, leading, own, owns, owned, owning, run, runs, ran, running, head, heads, "
    "headed, heading, manage, manages, managed, managing, maintain, maintains, maintained, "
    "maintaining, founded, founds, started, took over, take over, takes over, taking over, "
    "has taken over, oversee, oversees, oversaw, drive, drives, drove, "
    "in charge of, is in charge of, responsible for, the lead on, the lead of, the owner of, "
    "the maintainer of, the head of"
)
PREFER_VERBS: Final = _phrases(
    "prefer, prefers, preferred, preferring, like, likes, love, loves, enjoy, enjoys, "
    "'d rather have, would rather have, 'd rather, would rather, favour, favor, "
    "drink, drinks, drinking, am into, 'm into, am now into, started drinking,"
    " switched to drinking, now drink, now prefer, go for, stick to, stick with, mostly drink"
)
SWITCH_VERBS: Final = _phrases(
    "switched, switch, switching, changed, change, changing, went, gone, moved, migrated, "
    "converted, swapped, swap, traded"
)
"""'switched from A to B': B takes A's place."""
ROLE_VERBS: Final = _phrases(
    "work as, works as, working as, worked as, employed as, hired as, promoted to, "
    "got promoted to, was promoted to, been promoted to, became, become, becoming, "
    "now a, started as, serve as, serves as, serving as, act as"
)
ROLE_NOUNS: Final = _phrases("role, title, job title, job, position, official title")
"""'my role is X'."""

EVENT_VERBS_AT: Final = _phrases(
    "is on, is at, is scheduled for, is scheduled on, is planned for, is set for, is booked for,"
    " is due, is due on, is due by, will be on, will be, takes place on, happens on, is happening on,"
    " falls on, lands on, was on, is now on, is now, is"
)
EVENT_VERBS_MOVED: Final = _phrases(
    "moved to, was moved to, got moved to, has been moved to, is moved to, has moved to, "
    "pushed to, was pushed to, got pushed to, has been pushed to, pushed back to, "
    "postponed to, was postponed to, got postponed to, rescheduled to, "
    "was rescheduled to, got rescheduled to, rescheduled for, was rescheduled for, "
    "delayed to, was delayed to, got delayed to, brought forward to, was brought forward to, "
    "changed to, was changed to, shifted to, was shifted to, slipped to, moved up to, "
    "is moving to, moves to"
)
EVENT_CANCEL: Final = _phrases(
    "is cancelled, is canceled, was cancelled, was canceled, got cancelled, got canceled, "
    "has been cancelled, has been canceled, is called off, was called off, got called off, "
    "is off"
)
EVENT_MOVE_VERBS: Final = _phrases(
    "moved, pushed, postponed, rescheduled, delayed, shifted, brought forward, moved up"
)
"""'we moved the offsite to March 10'."""
EVENT_NOUNS: Final = _words(
    "offsite off-site meeting meetup standup stand-up review retro retrospective launch release "
    "deadline demo interview appointment party wedding trip flight conference summit hackathon "
    "workshop kickoff kick-off call sync presentation talk exam test deployment deploy migration "
    "cutover rollout go-live dinner lunch concert festival ceremony graduation vacation holiday "
    "holidays visit checkup check-up surgery onsite on-site planning sprint training course "
    "webinar event party birthday anniversary due date submission"
)

TENTATIVE_CUES: Final = _phrases(
    "will, 'll, going to, gonna, planning to, plan to, plans to, planning on, thinking about, "
    "thinking of, considering, might, may, could, would, maybe, perhaps, possibly, probably, "
    "hope to, hoping to, want to, wants to, wanna, would like to, 'd like to, intend to, "
    "about to, if, in case, should i, what if, someday, one day, eventually, potentially, "
    "likely, unless, wish, dreaming of, tempted to, the plan is, plan is to, plan is that"
)
FUTURE_PROGRESSIVE: Final = _words(
    "moving relocating joining starting switching migrating leaving quitting"
)
"""'I'm moving to Berlin': a plan until it happens."""
CORRECTION_CUES: Final = _phrases(
    "i meant, i mean, correction, my mistake, my bad, scratch that, typo, misspoke, mis-spoke, "
    "should have said, to correct"
)
"""A sentence with one of these corrects what was said."""
SOFT_CORRECTION_CUES: Final = _phrases("actually, sorry, oops, wait, no")
"""These correct only with the wrong value named ("actually it's Leeds, not Lees")."""
PAST_CUES: Final = _phrases("used to, previously, formerly, before that, back then, once")

# -- tools and their categories --------------------------------------------------------------

TOOL_CATALOGUE: Final[dict[str, tuple[str, ...]]] = {
    "database": _phrases(
        "PostgreSQL|postgres|postgresql|pg|psql, MySQL, MariaDB, SQLite|sqlite3, "
        "MongoDB|mongo, DynamoDB|dynamo, Cassandra, CockroachDB|cockroach, "
        "SQL Server|mssql, Supabase, Firestore, Turso, libSQL, Neo4j, ClickHouse, Snowflake, "
        "BigQuery, DuckDB, Couchbase, CouchDB, TimescaleDB, InfluxDB, PlanetScale, Aurora, "
        "Oracle DB|oracle database"
    ),
    "cache": _phrases("Redis, Memcached, Valkey, Varnish, KeyDB, Dragonfly"),
    "queue": _phrases(
        "Kafka, RabbitMQ|rabbit, SQS, NATS, Pulsar, Kinesis, Celery, Sidekiq, ActiveMQ, "
        "ZeroMQ, Pub/Sub|pubsub, Redpanda, BullMQ, Resque, EventBridge"
    ),
    "ci": _phrases(
        "GitHub Actions|gh actions, GitLab CI, Jenkins, CircleCI|circle ci, "
        "Travis CI|travis, Buildkite, Drone, TeamCity, Bamboo, Azure Pipelines, "
        "Woodpecker, Concourse"
    ),
    "cloud": _phrases(
        "AWS|amazon web services, GCP|google cloud, Azure, Hetzner, DigitalOcean, "
        "Fly.io|fly, Heroku, Vercel, Netlify, Cloudflare, Linode, OVH, Render, Railway, Scaleway"
    ),
    "editor": _phrases(
        "Vim, Neovim|nvim, Emacs, VS Code|vscode|visual studio code, Cursor, IntelliJ, "
        "PyCharm, Sublime Text|sublime, Helix, Zed, Nano, Xcode, Android Studio, WebStorm, "
        "GoLand"
    ),
    "language": _phrases(
        "Python, Rust, Golang, TypeScript, JavaScript, Java, Kotlin, Ruby, Elixir, Haskell, "
        "Scala, Swift, PHP, Zig, Clojure, OCaml, Erlang, Julia, C++"
    ),
    "framework": _phrases(
        "Django, Flask, FastAPI, Rails|ruby on rails, React, Vue, Svelte, Angular, "
        "Next.js|nextjs, Spring, Express, Laravel, Phoenix, Textual, Node.js|nodejs|node"
    ),
    "os": _phrases("Linux, macOS|osx, Ubuntu, Debian, Fedora, Arch Linux, NixOS, FreeBSD"),
    "container": _phrases("Docker, Podman"),
    "orchestration": _phrases("Kubernetes|k8s, Nomad, ECS, Docker Swarm, OpenShift"),
    "monitoring": _phrases(
        "Grafana, Prometheus, Datadog, Sentry, New Relic, Honeycomb, Splunk, PagerDuty"
    ),
    "search": _phrases("Elasticsearch, OpenSearch, Meilisearch, Typesense, Algolia, Solr"),
    "vcs": _phrases("Git, Mercurial, SVN|subversion"),
    "hosting": _phrases("GitHub, GitLab, Bitbucket, Codeberg"),
    "chat": _phrases("Slack, Microsoft Teams, Discord, Mattermost, Zulip"),
    "tracker": _phrases("Jira, Linear, Trello, Asana, YouTrack, ClickUp, Shortcut"),
    "notes": _phrases("Notion, Obsidian, Confluence, Evernote, Logseq"),
    "browser": _phrases("Firefox, Chrome, Safari, Brave"),
    "shell": _phrases("Bash, Zsh, Fish shell"),
    "iac": _phrases("Terraform, Ansible, Pulumi, Puppet"),
    "webserver": _phrases("Nginx, Caddy, Traefik, HAProxy"),
    "llm": _phrases("OpenAI, Claude, Ollama, ChatGPT, Gemini, Mistral"),
    "payments": _phrases("Stripe, Adyen, PayPal, Braintree"),
    "email": _phrases("SendGrid, Mailgun, Postmark"),
    "auth": _phrases("Auth0, Okta, Keycloak"),
    "design": _phrases("Figma, Sketch"),
    "packages": _phrases("npm, pip, Poetry, uv, yarn, pnpm"),
    "testing": _phrases("pytest, Jest, Cypress, Playwright, Selenium"),
    "linter": _phrases("ruff, ESLint, flake8, pylint"),
    "types": _phrases("mypy, pyright"),
    "multiplexer": _phrases("tmux"),
    "sync": _phrases("libsql sync"),
}
"""category → "Canonical|alias|alias" entries."""

CATEGORY_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "database": _phrases(
        "database, databases, db, dbs, datastore, data store, primary store, storage layer, "
        "sql database, main database, persistence"
    ),
    "cache": _phrases("cache, caching, caches, cache layer"),
    "queue": _phrases(
        "queue, queues, queueing, queuing, message queue, message broker, broker, messaging, "
        "job queue, jobs, background jobs, task queue, event bus, events, streaming"
    ),
    "ci": _phrases("ci, ci/cd, cicd, builds, continuous integration, pipelines, pipeline"),
    "cloud": _phrases("cloud, hosting, infra, infrastructure, cloud provider, servers"),
    "editor": _phrases("editor, ide, text editor, code editor"),
    "language": _phrases("language, programming language, backend language"),
    "framework": _phrases("framework, web framework"),
    "monitoring": _phrases(
        "monitoring, metrics, observability, alerting, dashboards, error tracking, errors"
    ),
    "search": _phrases("search, full-text search, search engine, full text search"),
    "vcs": _phrases("version control, source control"),
    "hosting": _phrases("code hosting, repos, repositories, git hosting"),
    "chat": _phrases("chat, team chat"),
    "tracker": _phrases("tickets, issue tracking, issue tracker, project management, tasks"),
    "notes": _phrases("notes, note-taking, note taking, docs, documentation, wiki"),
    "orchestration": _phrases("orchestration, deployments, container orchestration"),
    "payments": _phrases("payments, billing"),
    "email": _phrases("email, emails, mail, transactional email"),
    "auth": _phrases("auth, authentication, login, sso"),
    "llm": _phrases("llm, llms, ai, language model"),
    "os": _phrases("os, operating system"),
    "shell": _phrases("shell"),
    "browser": _phrases("browser"),
    "iac": _phrases("infrastructure as code, provisioning"),
}
"""category → the words that name it ("uses Kafka for its queue", "as a cache")."""

PREFERENCE_CATALOGUE: Final[dict[str, tuple[str, ...]]] = {
    "drink": _phrases(
        "coffee, tea, green tea, black tea, herbal tea, matcha, espresso, latte, cappuccino, "
        "flat white, decaf, water, sparkling water, juice, beer, wine, kombucha, hot chocolate, "
        "chai, mate, yerba mate, soda, cola, milk, oat milk, smoothies"
    ),
    "diet": _phrases(
        "vegetarian, vegan, pescatarian, keto, gluten-free, halal, kosher, paleo, "
        "plant-based, low-carb, meat, fish"
    ),
    "time_of_day": _phrases(
        "mornings, early mornings, evenings, afternoons, nights, late nights, late evenings"
    ),
    "work_mode": _phrases(
        "remote, remote work, working remotely, working from home, hybrid, the office, "
        "office, in-person, in person, on-site, onsite"
    ),
    "communication": _phrases(
        "email, slack, calls, phone calls, video calls, texts, text messages, async, "
        "async updates, short updates, written updates, meetings"
    ),
    "transport": _phrases(
        "bike, biking, cycling, car, driving, train, trains, bus, walking, public transport, "
        "scooter, subway, metro"
    ),
    "pet": _phrases("cats, dogs, cat, dog"),
    "theme": _phrases("dark mode, light mode, dark theme, light theme"),
}

ROLE_HEADS: Final = _words(
    "engineer developer dev programmer designer manager director scientist analyst architect "
    "consultant lead head founder co-founder cofounder ceo cto cfo coo cpo vp president intern "
    "student researcher professor teacher nurse doctor lawyer accountant writer journalist "
    "marketer recruiter sre devops administrator admin specialist coordinator officer associate "
    "assistant technician tester qa pm chef artist photographer freelancer contractor postdoc "
    "lecturer librarian pharmacist dentist therapist mechanic electrician plumber pilot "
    "salesperson representative rep advisor adviser strategist economist statistician "
    "mathematician physicist chemist biologist supervisor executive partner principal fellow "
    "maintainer owner editor copywriter translator tutor coach trainer paramedic surgeon "
    "veterinarian vet programmer webmaster dba"
)

# -- words that are never names ----------------------------------------------------------------

FILLERS: Final = frozenset(
    _words(
        """around about approximately roughly nearly almost noted got ok okay sure thanks thank thx yes yeah yep yup nope no hi hello hey great
        cool nice perfect right well so first second third then also actually sorry please
        understood absolutely anyway anyways btw oh ah wow alright awesome done good hmm next
        finally lastly today tomorrow yesterday tonight sounds let let's here now just maybe
        remember note reminder update plus still however and but or if when because although
        though since after before once meanwhile otherwise besides instead honestly basically
        fyi quick welcome congrats congratulations happy dear cheers regards best kind glad
        exactly definitely certainly totally agreed indeed interesting fantastic excellent
        amazing wonderful lovely fine true correct sadly unfortunately luckily hopefully
        currently recently lately earlier later soon again additionally moreover also overall
        generally usually often sometimes always never maybe perhaps possibly probably sounds
        looks seems feel think guess wait hold listen look see imagine suppose consider
        remind reminder important urgent quickly briefly summary tldr ps nb edit re fwd
        morning afternoon evening night yes no why what who where which how whose
        last this that these those every each another some any all both either neither
        new old big small main other same such own few many much more most less least
        i'll i'm i've i'd im ive ill dont don't it's its he's she's we're they're you're
        we'll they'll you'll there's here's what's that's let's"""
    )
)
"""Sentence-initial fillers and acknowledgements: a capitalised word that is only a
capital because it opens a sentence or answers one."""

HOLIDAYS: Final = frozenset(
    _words(
        """christmas xmas easter thanksgiving halloween hanukkah chanukah diwali ramadan eid
        passover purim kwanzaa pentecost lent advent epiphany hogmanay carnival mardi gras
        valentine valentine's valentines boxing labor labour memorial independence juneteenth
        veterans columbus presidents mother's father's mothers fathers new year year's years
        eve day days good friday black cyber monday holiday holidays bank solstice equinox
        st patrick's patrick saint nicholas lunar chinese festival yom kippur rosh hashanah
        vesak holi onam pongal songkran nowruz"""
    )
)
"""Holiday names and the words they are made of ("New Year's Eve", "Good Friday")."""

TIME_NAMES: Final = frozenset(
    _words(
        """monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays
        thursdays fridays saturdays sundays mon tue tues wed thu thur thurs fri sat sun
        weekend weekends weekday weekdays january february march april may june july august
        september october november december jan feb mar apr jun jul aug sep sept oct nov dec
        spring summer autumn fall winter q1 q2 q3 q4 h1 h2 am pm utc gmt cet cest pst pdt est
        edt bst eod eow asap today tomorrow yesterday tonight morning afternoon evening night
        noon midnight week month year quarter"""
    )
)
"""Weekdays, months, seasons and time words: dates, not things."""

DEMONYMS: Final = frozenset(
    _words(
        """american british canadian german french spanish italian dutch polish chinese japanese
        indian irish scottish welsh english australian brazilian mexican portuguese swiss
        swedish norwegian danish finnish russian ukrainian greek turkish korean vietnamese
        nigerian kenyan israeli european asian african latino latina hispanic belgian austrian
        czech hungarian romanian bulgarian serbian croatian argentinian argentine chilean
        colombian peruvian egyptian moroccan pakistani bangladeshi filipino thai indonesian
        malaysian singaporean new zealander kiwi"""
    )
)
"""'I'm German' says where from, not who."""

NOT_OBJECTS: Final = frozenset(
    _words(
        """home work school office bed town the city place flat apartment house abroad overseas
        it them him her this that there here something anything nothing everything someone
        anyone everyone nobody somewhere anywhere nowhere everywhere myself yourself himself
        herself ourselves themselves me us you one ones lot lots bit while moment time times
        all both either each way end stuff things thing first"""
    )
)
"""Words that follow "in"/"at"/"to" without naming a place or a company ("I work at home")."""

TOOL_WORDS: Final = frozenset(
    _words(
        """node fly rabbit linear cursor render railway express spring drone chrome sketch
        shortcut nano phoenix rails react swift rust java helix zed nomad concourse
        woodpecker aurora dragonfly brave safari bamboo celery sentry honeycomb pulsar arch
        fish textual poetry yarn uv pip teams slack notion discord trello obsidian edge"""
    )
)
"""Tool names that are also ordinary words: a tool only when written with a capital, or as
the object of "uses"."""
TOOL_PERSON_NAMES: Final = frozenset(_words("julia ruby claude jenkins gemini mistral"))
"""Tool names that are also people's names: a tool only as the object of "uses"."""
IMPERATIVES: Final = frozenset(
    _words(
        "try check ask tell make keep add remove fix send call meet read write review book plan buy pay"
    )
)
"""Verbs that open a note ("Prefer Postgres …", "Ask Maya …"): not part of a name."""
DATE_WORDS: Final = frozenset(
    _words(
        """0 today tomorrow yesterday tonight next last this coming week month year weekend
        monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun
        january february march april may june july august september october november december
        jan feb mar apr jun jul aug sep sept oct nov dec"""
    )
)
"""Words that may start a date phrase ("0": any number)."""
NOT_PEOPLE: Final = frozenset(
    _words(
        """airlines airways airport club association council ministry department museum park
        station hotel restaurant cafe store shop market center centre street road avenue bridge
        lake river mountain beach path trail island county city state province republic kingdom
        church cathedral temple theatre theater stadium arena mall library gallery zoo fund trust
        partners ventures capital media press news times post journal magazine records games
        motors pharma health clinic academy team app service platform project product tool
        tumbler bottle"""
    )
)
"""Words that make a name a place, a body or a thing, not a person ("American Airlines")."""
WEAK_USE_VERBS: Final = _phrases(
    "moved to, moving to, switched to, switch to, switching to, migrated to, migrate to, "
    "migrating to, is on, are on, went with, go with, chose, picked, settled on, adopted"
)
"""Verbs of using that need a known tool or a category ("moved to Lisbon" is no tool)."""
TASTE_VERBS: Final = _phrases(
    "like, likes, love, loves, enjoy, enjoys, am into, 'm into, go for, drink, drinks, drinking,"
    " now drink, mostly drink, stick to, stick with"
)
"""Verbs whose object counts only when it is a known taste ("I drink tea", not "drinks hot")."""
LEAVE_JOB_WORDS: Final = _words("quit resign resigned laid fired retired stepped job role working")
LEAVE_HOME_WORDS: Final = _phrases("out of, away from")
LEAVE_TOOL_WORDS: Final = _words("using dropped drop rid off ditched abandoned gave")
"""Which slot an ending verb ends: a job, a home, a tool."""
