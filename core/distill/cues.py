"""The cue data of rule-mode distillation: fact kinds with their category and importance, the
regexes and trigger words that mark each kind, the word classes that make a short statement
worth keeping (first person, change verbs, dates, known tools), what an assistant's
acknowledgement looks like, the owner-profile fields, and the word lists of names and filler."""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


KINDS = (
    "lesson",
    "decision",
    "preference",
    "person",
    "task",
    "event",
    "technical",
    "profile",
    "note",
)
CUE_KINDS = KINDS[:6]
"""The kinds cue words decide, in the order they are tried."""
CATEGORY = {
    "lesson": "lessons",
    "decision": "decisions",
    "preference": "owner/preferences",
    "person": "people",
    "task": "tasks",
    "event": "events",
    "technical": "technical",
    "profile": "owner/profile",
    "note": "notes",
}
IMPORTANCE = {
    "lesson": 0.85,
    "decision": 0.8,
    "preference": 0.75,
    "profile": 0.75,
    "person": 0.7,
    "task": 0.6,
    "technical": 0.6,
    "event": 0.55,
    "note": 0.45,
}
USER_ONLY = frozenset({"lesson", "task", "preference", "person", "profile"})
"""Kinds only the person's own words give: an assistant's line of these kinds is a promise, an
echo or a restatement, never knowledge."""

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
RELATIONS = (
    r"(?:wife|husband|partner|spouse|daughter|son|kids?|children|child|baby|mom|mum|mother|"
    r"dad|father|parents|brother|sister|siblings?|boss|manager|friend|colleague|co-?worker|"
    r"teammate|co-?founder|mentor|neighbou?r|room-?mate|flatmate|landlord|landlady|doctor|"
    r"dentist|therapist|lawyer|accountant|client|cousin|aunt|uncle|grandma|grandpa|"
    r"grandmother|grandfather|niece|nephew|fianc[ée]e?|girlfriend|boyfriend|in-laws?|"
    r"team lead|tech lead|lead|supervisor|tutor|teacher|coach)"
)
_RELATION_ADJ = r"(?:(?:new|old|former|ex-?|current|older|younger|little|big|best|late) )?"
CUE_PATTERNS: dict[str, str] = {
    "lesson": r"lessons? learn[et]|\blessons?(?: for (?:me|us|today|the team|next time))?\s*[:—–-]|\blearn[et] (?:that|the hard way)|"
    r"note to self\s*[:,—–-]?\s*(?:don'?t|do not|never|always|avoid|make sure|remember)|"
    r"\bnever again\b|\bmistake was\b|\bgotcha\b|\bpitfalls?\b|\brule(?: of thumb)?\s*[:—–-]|"
    r"\bgolden rule\b|\btakeaway\s*[:—–-]|\bfrom now on\b|\bdon'?t ever\b|\bdo not ever\b|"
    r"\bmake sure to\b|^remember to\b|"
    r"\bnext time,?\s+(?:(?:we|i|you)(?:'ll|\s+(?:should|must|need to|have to|will|ought to))|"
    r"let'?s|make sure|remember|don'?t|do not|always|never|avoid|check|use|test|run|ask|try|"
    r"book|double-check)\b|"
    r"^(?:(?:so|and|but|ok|okay|also|then|please)\W+)*(?:always|never)\s+[a-z]|"
    r"^(?:(?:so|and|but|ok|okay|also|then|please)\W+)*(?:don'?t|do not)\s+"
    r"(?!forget\b|worry\b|mind\b|know\b|think\b|remember\b)[a-z]|"
    r"\b(?:should|must|to|will|'ll)\s+(?:always|never)\s+[a-z]",
    "decision": r"\bdecided\b|\bdecide to\b|\bdecision\b|\bwe'?ll go with\b|\bgoing with\b|"
    r"\bagreed\b|\bsettled on\b|\bchose\b|\bchoose to\b|\blet'?s (?:use|go with|stick with)\b|"
    r"\bopted\b|\bswitch(?:ed|ing)? to\b|\bwill use\b|\bwe use\b",
    "preference": r"\bi (?:really )?(?:prefer|like|love|hate|dislike|enjoy|don'?t like|"
    r"can'?t stand)\b|\bprefers?\b|\bfavou?rite\b|\bcall me\b|\bi want you to\b|"
    r"\bplease (?:always|never)\b",
    "person": rf"\bmy {_RELATION_ADJ}{RELATIONS}\b|\b(?:is|was) my {_RELATION_ADJ}{RELATIONS}\b|"
    r"\bbirthday\b|\bborn\b",
    "task": r"\btodo\b|\bto-do\b|\bneed to\b|\bneeds to\b|\bnext step|\bfollow[ -]up\b|"
    r"\bremind me\b|\b(?:set|add|create) a reminder\b|\baction item|\bdon'?t forget to\b|\bi'?ll\b|\bwe'?ll\b|\bplan to\b|"
    r"\bhave to\b|\bhas to\b|\bgotta\b|\bgot to\b|\bmust (?!always|never|be\b)|"
    r"\bdeadline\b|\bdue\b|"
    rf"\btomorrow\b|\b(?:by|before|until|till) (?:the )?(?:end of|eod|eow|tonight|tomorrow|next|"
    rf"{_DAY}|{_MONTH} \d|\d)|\[ \]",
    "event": r"\bdeployed\b|\bshipped\b|\breleased\b|\blaunched\b|\bfixed\b|\bfinished\b|"
    r"\bcompleted\b|\bmerged\b|\bmet (?:with )?\b|\bmeeting\b|\bdeadline\b|\bdue\b|"
    r"\bscheduled\b|\bbooked\b|\binstalled\b|\bupgraded\b|\bmigrated\b|\bhappened\b|"
    rf"\byesterday\b|\btoday\b|\b{_MONTH} \d{{1,2}}\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b|\[x\]",
}
CUES = {k: re.compile(v, re.I) for k, v in CUE_PATTERNS.items()}
TRIGGERS: dict[str, frozenset[str]] = {
    "lesson": _words(
        """lesson lessons learned learnt note never mistake gotcha pitfall pitfalls always
        don't dont do make remember rule golden takeaway next from"""
    ),
    "decision": _words(
        """decided decide decision we'll going agreed settled chose choose let's lets opted
        switch switched switching will use"""
    ),
    "preference": _words("i prefer prefers favorite favourite call please"),
    "person": _words("my birthday born"),
    "task": _words(
        """todo to-do need needs next follow follow-up remind reminder action don't i'll we'll plan
        tomorrow by before until till have has gotta got must deadline due"""
    ),
    "event": _words(
        """deployed shipped released launched fixed finished completed merged met meeting
        deadline due scheduled booked installed upgraded migrated happened yesterday today"""
    ),
}
MONTHS = _words("jan feb mar apr may jun jul aug sep oct nov dec")
CRITICAL = re.compile(r"\b(?:critical|urgent|important|must|never|password|credential)\b", re.I)
WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
SENTENCE_END = re.compile(
    r"(?<=[.!?])(?<!\bMr\.)(?<!\bMrs\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)(?<!\bProf\.)"
    r"(?<!\bSr\.)(?<!\bJr\.)(?<!\bvs\.)(?<!\be\.g\.)(?<!\bi\.e\.)\s+(?=[\"'(\[]?[A-Z0-9])"
)
"""A sentence's end: not the dot of a title or an abbreviation ("Mr. Sousa", "St. Mary's")."""
QUESTION_START = re.compile(
    r"^(?:(?:so|ok|okay|and|but|also|anyway|btw),?\s+)?(?:what|how|where|which|who|why|when)\b|"
    r"^(?:should|can|could|do|does|is|are|am|will|would)\s+(?:i|we|you|u)\b",
    re.IGNORECASE,
)
"""A question without its question mark ("what do i need to buy today")."""
UNSURE = re.compile(
    r"^\s*(?:and |but |so )?if\b|\bif (?:i|we) ever\b|\bmaybe\b|\bprob(?:ably)?\b|\bmight\b|"
    r"\bnothing (?:is )?(?:decided|final|signed)\b|\bnot (?:decided|sure) yet\b|"
    r"\bthinking (?:about|of)\b|\bconsidering\b",
    re.IGNORECASE,
)
"""A plan not made or a what-if ("we're prob moving to Boulder", "if I ever moved"): neither a
task nor a decision, only a note."""
BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)
NAME = re.compile(
    r"\b(?:with|met|told|asked|call(?:ed)?|email(?:ed)?|ping(?:ed)?|thank(?:ed)?|from|and|by)"
    r"\s+([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?)\b"
    r"|\b([A-Z][a-z]{2,})(?:'s\b| (?:said|says|told|asked|wants|thinks|mentioned|suggested|"
    r"agreed|approved|prefers|likes)\b| \((?:wife|husband|partner|daughter|son|boss|friend|"
    r"colleague|mom|dad|mother|father|sister|brother)\b)"
)
NOT_NAMES = frozenset(
    """I You We They He She It The This That These Those There Then When Where What Why How
    Who Which Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March
    April May June July August September October November December Jan Feb Mar Apr Jun Jul Aug
    Sep Sept Oct Nov Dec Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun Today Tomorrow Yesterday
    Tonight User Agent Assistant Also And But Yes Sure Thanks Thank Okay Ok Please Let Just
    Maybe Here Now Next Done Note Todo Our Your My His Her Their Its Git Docker Python Linux
    Windows Github Google Slack Hi Hello Hey Dear Great Good Cool Nice Perfect Noted Got Sounds
    So If Not No Of For In On At To From With By As Or Once Since Until After Before Every
    Lesson Rule Remember Never Always Don't Do Did Does Is Are Was Were Will Would Should Can
    Could Might Must Have Has Had Be Been Oh Ah Well Congrats Congratulations Reminder Mr Mrs Ms
    Dr Prof Sr Jr St Fyi Btw Asap Lol Omg Tbh Imo Eod Eta
    Everything Nothing Something Anything Everyone Someone Nobody Last First New Old Another
    Some Any All Both Each Most More Very Really Team""".split()  # noqa: SIM905
)
FILLER = _words(
    """lesson lessons learned learnt always decided decide decision agreed chose let lets
    let's we'll i'll we i you use using need needs going go will would should must also really
    just please todo note today"""
)
VAGUE = _words(
    """thing things stuff something anything everything nothing one way lot bit later soon
    earlier again already yeah yes ok okay sure fine good great right got get getting sounds
    like well actually maybe probably think guess know mean said say told tell it's that's
    i'm i've i'd we're we've you're you've you'll they're there's what's let's don't can't
    won't didn't isn't wasn't aren't doesn't"""
)
"""Words that carry no content of their own: a sentence of only these, filler, cue words and
date words says nothing ("We decided this last week.")."""

# -- the word classes of a short statement worth keeping --------------------------------------

FIRST_PERSON_SINGULAR = _words("i i'm im i've ive i'd i'll my")
"""The person as the subject: a statement about their own life."""
FIRST_PERSON = FIRST_PERSON_SINGULAR | _words("we we're we've we'll our")
"""The person or their team as the subject: a statement about their life or work."""
CHANGE_WORDS = _words(
    """move moved moving relocate relocated relocating start started starting join joined
    joining left leave leaving quit quitting switch switched switching change changed changing
    accept accepted promoted promotion hired fired resigned retired married engaged divorced
    graduated adopted bought sold became become renamed migrated upgraded downgraded signed
    launched enrolled passed dropped stopped began begun returned transferred replaced rented
    moved-in broke hired onboarded laid new now anymore longer recently since uses using
    lost won finished"""
)
"""Change verbs and markers: what makes "I moved to Porto" or "X now uses Y" an update."""
DATE = re.compile(
    rf"\b(?:today|tonight|tomorrow|yesterday|weekend|(?:next|last|this|coming) "
    rf"(?:week|month|year|weekend|quarter|spring|summer|autumn|fall|winter|{_DAY})|{_DAY}s?|"
    rf"{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}|"
    r"(?:january|february|march|april|june|july|august|september|october|november|december)|"
    r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?|(?:19|20)\d{2}|"
    r"\d{1,2}(?::\d{2})?\s*(?:am|pm)|\d{1,2}:\d{2}|"
    r"in \d+ (?:days?|weeks?|months?|years?)|\d+ (?:days?|weeks?|months?|years?) ago|ago)\b",
    re.I,
)
DATE_WORDS = _words(
    """today tonight tomorrow yesterday weekend next last this coming week weeks month months
    year years quarter ago morning afternoon evening night monday tuesday wednesday thursday
    friday saturday sunday mondays tuesdays wednesdays thursdays fridays saturdays sundays
    spring summer autumn fall winter"""
)
TOOLS = _words(
    """postgres postgresql mysql mariadb sqlite redis mongodb kafka rabbitmq elasticsearch
    docker podman kubernetes k8s terraform ansible nginx traefik linux macos ubuntu debian
    nixos python golang javascript typescript nodejs deno kotlin svelte nextjs django fastapi
    laravel aws gcp hetzner cloudflare vercel netlify heroku fly.io supabase firebase paypal
    git github gitlab bitbucket jira trello confluence vscode vim neovim emacs intellij pycharm
    xcode figma grafana datadog pytorch tensorflow jupyter numpy conda npm pnpm homebrew
    openai chatgpt ollama tmux zsh iterm jenkins circleci"""
)
"""Tools and platforms named in lower case as often as not (not those that are also common
words, like Linear, Slack or Notion: those count as names when capitalised)."""

# -- assistant acknowledgements, promises and restatements -------------------------------------

_ACK = (
    r"ok(?:ay)?|sure(?: thing)?|got it|noted|understood|will do|done|great|perfect|absolutely|"
    r"of course|certainly|no problem|sounds good|sounds great|alright|all right|right|yes|yep|"
    r"yeah|thanks?(?: you)?(?: so much)?|thx|ty|congrat(?:s|ulations)|good call|good idea|nice|"
    r"cool|makes sense|i see|gotcha|roger(?: that)?|awesome|wonderful|excellent|good to know|"
    r"happy to help|my pleasure|you'?re welcome|no worries|fair enough|that'?s great|"
    r"glad to hear(?: that)?|good news|interesting|hi|hello|hey|hiya|morning|ah|oh|wow|"
    r"lol|haha|hmm|amazing|lovely|brilliant|exciting|how exciting|that'?s exciting|"
    r"that'?s wonderful|that'?s amazing|that sounds (?:great|good|exciting|wonderful|lovely)"
)
ACK_LEAD = re.compile(
    rf"^(?:(?:{_ACK})(?:\s*[,.!:;—–-]+\s*|\s+(?=(?:{_ACK}|pls|please)\b)|\s*$)|"
    rf"(?:pls|please)\s*[,.!:;—–-]+\s*)+",
    re.I,
)
"""Acknowledgements and greetings at the start of a sentence, up to their punctuation."""
CONFIRMING = re.compile(
    r"^(?:noted|understood|got it|gotcha|will do|roger(?: that)?)\s*[,.!:;—–-]",
    re.I,
)
"""An assistant's sentence that opens by confirming: what follows restates the person."""
FAREWELL = re.compile(
    r"^(?:see you|talk (?:to you )?(?:soon|later|tomorrow)|have a (?:good|great|nice)|"
    r"take care|good ?night|bye|cheers|catch you)\b",
    re.I,
)
ASSISTANT_SELF = re.compile(
    r"^(?:(?:and|so|then|also|now|just)\s+)?(?:i\b|i'|let me\b|let'?s\b|allow me\b|"
    r"we(?:'ll| will| can| could| should)\b|feel free\b|hope (?:this|that) helps\b|"
    r"happy to\b|glad to\b|enjoy\b|good luck\b|welcome\b|congrat\w*\b|well done\b|sorry\b|"
    r"that'?s (?:great|wonderful|awesome|exciting|amazing|a big step)\b|how exciting\b)",
    re.I,
)
"""An assistant speaking of itself (a promise, a report of what it did, an offer), or politely
closing: "I'll update your location", "I've noted that", "Let me know", "Good luck!"."""
ACK_STATE = re.compile(
    r"^(?:(?:reminder|note|task|alarm|event|profile|location|address|preference|memory|"
    r"it|that|this|everything|all)\s+(?:is\s+|has been\s+|'s\s+)?(?:now\s+)?"
    r"(?:set|saved|added|updated|noted|stored|recorded|created|scheduled|changed|done|"
    r"remembered|in place)|(?:saved|updated|added|recorded|stored|scheduled|changed|set|"
    r"remembered|on it|consider it done))\b",
    re.I,
)
"""An assistant's report that it did what it was told: "Reminder set for Friday.",
"Location updated.", "Saved!"."""
RESTATE = re.compile(
    r"^(?:so|and so|ah|oh|wow)\W+you\b|\byou(?:'ve| have)? (?:mentioned|said|told me|noted|"
    r"shared|indicated|stated)\b|\bas you (?:said|mentioned|noted)\b|\byou(?:'re| are) now\b|"
    r"^your\b(?:\s+[\w'-]+){1,3}\s+(?:is|are|was|were|has|have)\b|\bfor you\b.*\b(?:remind|"
    r"note|track)|\byour (?:reminder|list|profile|notes?|calendar|tasks?)\b|"
    r"^(?:in summary|in short|to sum up|to summari[sz]e|overall|all in all|in brief)\b",
    re.I,
)
"""An assistant restating the person's own words back to them, or summing up its own answer."""
ECHO_OVERLAP = 0.6
"""The share of an assistant sentence's content words that a recent line of the user must hold
for the assistant's sentence to be an echo of it (merged into the user's fact, or dropped)."""

# -- lead-ins, names, projects ----------------------------------------------------------------

# Lead-ins that carry no knowledge: "Also remember that X" is X; "TODO: X" is the task X.
FILLER_LEAD = re.compile(
    r"^(?:(?:also|and|so|oh|ok(?:ay)?|btw|by the way|one more thing)[,:]?\s+)*"
    r"(?:please\s+)?(?:(?:remember|note|keep in mind|don'?t forget|make a note|fyi)"
    r"(?:\s+that|\s*:)|for the record[,:]?)\s+",
    re.I,
)
TASK_LEAD = re.compile(r"^(?:todo|to-do|fixme|action item|note to self)\s*[:\-–—]\s*", re.I)
_NAME_WORD = r"(?-i:[A-Z][\w'’.&-]*)"
PERSON_NAME = re.compile(
    rf"\bmy {_RELATION_ADJ}{RELATIONS}(?:'s)?(?:\s+name)?(?:\s+is|,)?\s+(?:now\s+)?"
    rf"(?P<a>{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,2}})"
    rf"|(?P<b>{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,2}})(?:,| is| was| \()\s*(?:now\s+)?"
    rf"(?:my|our) {_RELATION_ADJ}{RELATIONS}\b",
    re.I,
)
"""The name a fact about a person is about: "my manager is Diego Alvarez", "Sarah, my wife"."""
PROJECT_NAME = re.compile(
    rf"\b(?:project|repo|app|codebase|service|product)\s+(?P<a>{_NAME_WORD})"
    rf"|(?P<b>{_NAME_WORD})\s+(?:project|repo|app|codebase)\b"
    rf"|\bwork(?:ing|s)? on (?:the )?(?P<c>{_NAME_WORD})",
    re.I,
)
"""A project the sentence names: "the Ledgerly repo", "project Atlas", "working on Orbit"."""

# -- the owner profile ------------------------------------------------------------------------

_V = r"(?P<v>[\w'’&.-]+(?:\s+[\w'’&.-]+){0,4})"
_PAST = r"(?:'ve|\s+have|\s+just|\s+recently|\s+finally|\s+officially|\s+now)*"
_DIETS = (
    r"vegetarian|vegan|pescatarian|pescetarian|gluten[- ]free|lactose[- ]intolerant|"
    r"dairy[- ]free|keto|paleo|halal|kosher|flexitarian|plant[- ]based"
)
PROFILE_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "location",
        rf"\b(?:i|we){_PAST}\s+(?:moved|relocated|moving|relocating)"
        rf"(?:\s+(?:back|over|house|out))?\s+(?:to|into)\s+{_V}",
    ),
    ("location", rf"^(?:just |recently |finally )?(?:moved|relocated)(?: back)? to {_V}"),
    (
        "location",
        rf"\b(?:i|we)(?:'re|'m|\s+am|\s+are)?\s+(?:now\s+)?(?:live|living|based|"
        rf"settled|staying)\s+in\s+{_V}",
    ),
    ("location", rf"\bmy (?:new )?(?:home|address|city|place) is (?:now )?(?:in )?{_V}"),
    (
        "employer",
        rf"\bi{_PAST}\s+(?:joined|started (?:a new job |working |my new job )?"
        rf"(?:at|with|for)|(?:now )?work(?:ing)? (?:at|for))\s+{_V}",
    ),
    (
        "employer",
        rf"^(?:just |recently )?(?:started|joined)(?: working| a new job)?(?: at| with| for)? {_V}",
    ),
    (
        "employer",
        rf"\bi{_PAST}\s+accepted (?:the|an?|their) (?:job |position |role )?"
        rf"offer (?:from|at|with) {_V}",
    ),
    ("employer", rf"\bi{_PAST}\s+accepted (?:the|their) {_V} (?:job )?offer"),
    ("employer", rf"\bmy new (?:employer|company|job|workplace) is (?:at )?{_V}"),
    ("role", rf"\bi{_PAST}\s+(?:got |was |been |have been )?promoted to (?:a |an |the )?{_V}"),
    ("role", rf"\bmy (?:new )?(?:role|title|position|job title) is (?:now )?(?:a |an )?{_V}"),
    ("role", rf"\bi(?:'m|m|\s+am) now (?:a|an|the) {_V}"),
    (
        "manager",
        rf"\bmy (?:new |current )?(?:manager|boss|team lead|line manager|supervisor)"
        rf"(?:'s name)? is (?:now )?{_V}",
    ),
    ("manager", rf"\bi (?:now )?report to {_V}"),
    (
        "manager",
        rf"(?P<v>{_NAME_WORD}(?:\s+{_NAME_WORD})?) is (?:now )?my (?:new )?"
        rf"(?:manager|boss|supervisor)\b",
    ),
    (
        "diet",
        rf"\bi(?:'m|m|\s+am)(?:\s+(?:now|currently|fully|mostly|strictly))*\s+(?P<v>{_DIETS})\b",
    ),
    ("diet", rf"\bi{_PAST}\s+(?:went|became|gone|turned)\s+(?P<v>{_DIETS})\b"),
    (
        "diet",
        r"\bi(?:'ve|\s+have)?\s+(?:stopped|quit|gave up|no longer)\s+(?:eating\s+)?"
        r"(?P<no>meat|fish|dairy|gluten|sugar|pork|alcohol|red meat)\b",
    ),
    ("tools", rf"\b(?:i|we){_PAST}\s+switched\s+(?:from\s+(?P<old>[\w.+-]+)\s+)?to\s+{_V}"),
    ("tools", rf"\b(?:i|we)\s+(?:now\s+)?use\s+{_V}\s+(?:now|these days|from now on)\b"),
    ("tools", rf"\b(?:i|we)\s+now\s+use\s+{_V}"),
)
PROFILE = tuple((name, re.compile(p, re.I)) for name, p in PROFILE_PATTERNS)
PROFILE_KEYS: dict[str, frozenset[str]] = {
    "location": _words("location city lives_in based_in home home_city residence lives based"),
    "employer": _words("employer company works_at workplace job organisation organization"),
    "role": _words("role title job_title position occupation"),
    "manager": _words("manager boss reports_to supervisor team_lead"),
    "diet": _words("diet dietary food eats"),
    "tools": _words("tools stack tooling editor"),
}
"""The keys an owner profile may already use for each field (compared in lower case, spaces
as `_`): a newer statement replaces the value under the key the profile has."""
VALUE_STOPS = _words(
    """last next this on in at since for because and but with from as after before when
    while until to by of yesterday today tomorrow tonight now recently ago soon so then
    which who where that there here it its is was are were be been has have had will would
    i i'm i've we you he she they my our your his her their me us him them"""
)
"""Words that end a profile value: "Porto last weekend" is Porto."""
NOT_VALUES = _words(
    """a an my our your his her their new another some the this that it there here home
    house place job work one someone something"""
)
MAX_TOOLS = 8
"""Tools an owner profile lists (the newest first)."""

# -- questions, greetings and skill triggers ---------------------------------------------------

WH_WORDS = _words(
    """what where who when which how why whose whom whats what's wheres where's whos who's
    whens when's hows how's whys whatre"""
)
GREETING_WORDS = _words(
    """hi hello hey hiya yo sup morning evening night thanks thank thx ty ok okay k kk yes yeah
    yep yup no nope nah sure cool great nice good fine awesome perfect lol haha bye goodbye
    cheers please pls hmm hm ah oh wow right alright got gotcha understood agreed done np
    welcome"""
)
"""The words of greetings, thanks and acknowledgements ("hi", "thanks!", "ok cool")."""
SKILL_FILLER = _words(
    """please pls plz thanks thank thx cheers hey hello today tonight tomorrow now just can
    could would will you your want wanted need needs let lets let's again also maybe really
    actually quickly quick some something thing stuff okay yes sure like help make get got
    going gonna wanna one time way know think see look"""
)
"""Words that never trigger a skill: politeness, time words and filler of a request."""
QUESTION_FILLER = _words(
    """please pls plz tell remind know recall again anything something thanks thank hey hi
    hello can could would you me"""
)
"""Words of a question that ask rather than name what is asked about ("whats", "tell me")."""
SMALL_TALK = re.compile(
    r"\b(?:how(?:'s| is| are| have)? (?:you|u|it going|things|life|everything|your day)"
    r"(?: been| doing| going)?|what'?s up|wh?at'?s new|how do you do|you there|are you there|"
    r"how'?s it going|sup)\b",
    re.I,
)
"""Small-talk questions: "how are you?", "what's up?"."""
REQUEST = re.compile(
    r"^(?:(?:hi|hey|hello|so|ok(?:ay)?|also|and|well|actually)\W+)*(?:"
    r"(?:i'?m|i am|we'?re|we are) (?:looking|searching|hoping|asking) for (?:some |a few |any |"
    r"a |an |more |good |new |the best )*(?:[\w-]+ ){0,3}(?:ideas?|recommendations?|suggestions?|"
    r"advice|tips|help|information|info|resources|options|ways|guidance|inspiration|deals?|"
    r"alternatives)\b|"
    r"(?:i|we) (?:need|want|would like|'d like|could use) (?:some |a bit of |more |your )?"
    r"(?:help|advice|suggestions?|recommendations?|ideas|tips|guidance|input)\b|"
    r"(?:i|we) (?:was|were|am|'m) (?:just )?(?:wondering|curious) (?:if|whether|what|how|about)\b|"
    r"(?:can|could|would|will) you (?:please )?(?:help|suggest|recommend|give|tell|provide|"
    r"explain|find|show|share|list|create|write|make|check)\b|"
    r"(?:please )?(?:help me|suggest|recommend|give me|tell me|show me)\b)",
    re.I,
)
"""A request to the assistant ("I'm looking for some recipe ideas", "Can you suggest…"): a
question in other words, not knowledge."""
REMIND = re.compile(r"\bremind me\b|\bdon'?t let me forget\b|\bset a reminder\b", re.I)
"""A reminder the person asks for: their task, even when asked as a question."""
TALK_WORDS = _words(
    """tip tips advice suggestion suggestions help helpful helps recommendation recommendations
    idea ideas information info answer answers response explanation explanations resource
    resources option options insight insights input guidance useful appreciate appreciated
    consider considering definitely certainly surely keep mind glad found find try trying
    check out look looking forward awesome amazing perfect wonderful fantastic excellent
    brilliant lovely cool nice thanks thank lot much super totally absolutely sense makes made
    informative interesting detailed clear great good points point list these those"""
)
"""Words about the conversation itself: a sentence whose content is only these thanks or
weighs the assistant's answer ("That's really helpful, thanks for the tips!", "I'll definitely
consider these suggestions") and says nothing of the person or the world."""
