"""The words frames read statements by: change, negation, plan and what-if cues, the words
that name a one-value attribute (where someone lives or works, their manager, role, name), the
tools of each kind, relatives, the first person, and the words a sentence opens with that are
not names. One place for the lexicon; `core.frames` holds the rules that use it."""

from __future__ import annotations

import re
import unicodedata

from tiermem.core import roles
from tiermem.core.terms import STOPWORDS, stem

CHANGE = frozenset(
    """now new newly moved move moving relocated switched switch switching changed change
    changing replaced replace instead anymore longer since started start starting joined
    became become promoted rescheduled postponed pushed bumped delayed shifted updated update
    finally ditched dropped migrated migrating extended these days nowadays currently""".split()  # noqa: SIM905
)
"""Words that say a value changed (taken out of the frame; one of them makes a claim a change)."""
NEGATION = re.compile(
    r"\b(?:no longer|no more|not anymore|any ?more|quit|stop(?:ped)?|don'?t (?:work|live|use)|"
    r"(?<!\bthe )(?<!\bmy )(?<!\byour )left|"  # "I left Acme", not "the left one"
    r"do not (?:work|live|use)|gave up|resigned from|retired from)\b",
    re.IGNORECASE,
)
HYPOTHETICAL = re.compile(
    r"\b(?:if|might|maybe|perhaps|thinking (?:about|of)|considering|could|would|wondering|"
    r"dream(?:ing)? (?:of|about)|someday|one day|hope to|want to|wanna|eventually|unless|"
    r"prob|probably|nothing (?:is )?decided|not (?:decided|sure) yet)\b",
    re.IGNORECASE,
)
"""A change that may never happen (a wish, a condition): it replaces nothing."""
FUTURE = re.compile(
    r"\b(?:will|shall|'ll|going to|gonna|plan(?:ning)? to|about to|next (?:year|month|week)|soon|"
    r"intend(?:s|ing)? to|expect(?:s|ing)? to|(?:asked|due|set|scheduled) to (?:move|relocate|start)|"
    r"^(?:\w+\W+){0,4}moving (?:back )?to|the plan is|plans? (?:is|are) to|planning|"
    r"(?:i'?m|i am|we'?re|we are|s?he'?s|they'?re) (?:moving|switching|changing|starting|"
    r"joining|leaving|relocating|migrating))\b",
    re.IGNORECASE,
)
"""A change planned for later: it replaces from its date on, or not at all without one."""
SLOT_WORDS: dict[str, str] = {
    word: f"~{slot}"
    for slot, words in {
        "residence": "live lives living lived based hometown flat apartment house "
        "neighbourhood neighborhood relocated",
        "employer": "work works working worked job employer company joined hired offer "
        "accepted employed",
        "manager": "manager boss lead supervisor head report reports reporting",
        "role": "role title position promoted",
        "name": "name named called renamed",
    }.items()
    for word in words.split()
}
"""Words that name one attribute, however it is said ("new boss" / "my manager")."""
_SLOT_SURFACE: dict[str, list[str]] = {}
for _word, _slot in SLOT_WORDS.items():
    _SLOT_SURFACE.setdefault(_slot, []).append(_word)
_SLOT_SURFACE["~residence"] += [
    "moved",
    "moving",
    "move",
    "i m in",
    "im in",
    "we re in",
    "here in",
    "where i am",
    "where we live",
    "where i live",
]
_SLOT_SURFACE["~role"] += roles.ROLE_NOUNS.split("|")
_SLOT_SURFACE["~employer"] += roles.ROLE_NOUNS.split("|")  # "the coordinator at glowbar"
_BASED_IN = re.compile(
    r"\b(?i:i'?m|i am|we'?re|we are|^[A-ZÀ-Þ][\w'’-]+ is)\s+(?i:now\s+|still\s+)?(?i:based\s+)?"
    r"(?i:in)\s+[A-ZÀ-Þ]"
)
"""Where someone is ("I'm in London", "Ravi is in Bengaluru")."""
HERE_IN = re.compile(
    r"\bhere in (?P<place>[A-ZÀ-Þ][\w'’-]+(?:\s+[A-ZÀ-Þ][\w'’-]+)?)|"
    r"\b(?P<there>[A-Za-zÀ-ÿ][\w'’-]+)(?:\s+time)?,?\s+(?i:that'?s|thats|which is) where "
    r"(?i:i|we)(?i:'m|\s+am|\s+are|\s+live)\b"
)
"""Where the speaker is ("an architect with Lindqvist here in Edinburgh", "after 6pm london
time, that's where i am")."""
_MOVED_BARE = re.compile(
    r"^(?:(?:we|i|just|finally|so)\s+)*(?:moved|relocated)\b"
    r"(?!\s+(?:the|my|our|it|them|this|that|his|her|their|a|an|out|on)\b)",
    re.IGNORECASE,
)
""""Moved last Saturday, we're officially Porto people now": a move with no object."""
""""I'm in Lisbon": where someone lives, said the short way."""
_MOVE_TO = re.compile(
    r"\b(?:mov(?:e|ed|ing)|relocat(?:e|ed|ing))\s+(?:back\s+)?(?:to|into|in)\s+[A-ZÀ-Þ]"
)
_WORK_ON = re.compile(r"\bwork(?:s|ing|ed)?\s+on\b", re.IGNORECASE)
LEAVES = re.compile(
    r"\b(?:(?:switch|switched|switching|mov(?:e|ed|ing)|chang(?:e|ed|ing)|went|go(?:ing)?|"
    r"migrat(?:e|ed|ing)|extended|pushed|postponed|delayed|slipped|shifted|upgraded|"
    r"relocat(?:e|ed|ing)|bumped)\b[^.;!?]{0,40}?\bfrom|"
    r"(?:(?:we|i|they)(?:'re|’re|'m|’m| are| am)|mov(?:ed|ing)|migrat(?:ed|ing)) off(?!\s+to\b)|"
    r"abandon(?:ed|ing)?|ditch(?:ed|ing)?|drop(?:ped|ping)?|replac(?:e|ed|ing)|instead of|"
    r"rather than|away from|stop(?:ped)? using|no longer using|not)\s+(?P<left>[^.;!?,]{1,60}?)"
    r"(?=\s+(?:to|for|with|and|in favou?r of|altogether|entirely)\b|[.;!?,]|$)",
    re.IGNORECASE,
)
"""What a statement says was left behind ("switched from coffee to green tea", "extended the
deadline from 14 October to 4 November", "abandon SPSS"): its older value, not its new one."""
CORRECTION = re.compile(
    r"\b(?:actually|sorry,? i meant|i meant|correction|to be clear|my mistake|typo)\b|,\s*not\s+\w|"
    r"^\s*(?:sorry|oops|whoops)\b[^.?!]*\bnot\b",
    re.IGNORECASE,
)
SLOTS = frozenset(
    """live lives living based home city town flat apartment address work works working job
    employer company firm office manager boss lead supervisor report reports role title position
    team database db queue broker ci cloud hosting host editor ide stack framework language
    orm cache deadline due date meeting offsite standup appointment flight trip launch release
    demo review interview wedding party birthday prefer preference favourite favorite drink
    diet summary summaries newsletter name called named partner wife husband girlfriend
    boyfriend cat dog pet phone email number budget salary rent price""".split()  # noqa: SIM905
)
"""Frame words of attributes that hold one value at a time: a change of value replaces."""
FILLER = frozenset(
    """yeah yes ok okay oh btw lol haha hey hi so well also really just actually basically
    literally pretty quite got get gets getting thing things stuff guess think know like
    kinda sorta anyway honestly finally last weekend week month year today yesterday ago""".split()  # noqa: SIM905
)
TOOL_KINDS: dict[str, str] = {
    tool: kind
    for kind, tools in {
        "database": "postgres postgresql mysql mariadb sqlite mongodb mongo dynamodb cassandra "
        "supabase firebase turso libsql cockroachdb",
        "queue": "kafka rabbitmq sqs nats celery pubsub",
        "ci": "jenkins circleci travis buildkite",
        "cloud": "aws gcp azure heroku vercel netlify hetzner digitalocean fly.io render railway",
        "editor": "vim neovim emacs vscode cursor zed pycharm intellij sublime helix",
        "channel": "slack teams discord email whatsapp telegram signal",
        "drink": "coffee tea matcha espresso latte cappuccino",
        "diet": "vegetarian vegan pescatarian flexitarian omnivore",
        "language": "python rust go golang java kotlin typescript javascript ruby php elixir",
        "framework": "django flask fastapi rails react vue svelte angular nextjs",
        "statistics": "spss stata sas r rstudio",
        "analytics": "mixpanel posthog amplitude heap plausible",
        "scheduler": "buffer hootsuite later sprout",
        "tracker": "jira linear asana trello clickup",
        "design": "figma sketch",
    }.items()
    for tool in tools.split()
}
"""Tools and things by what they are for: two of one kind for one subject are one slot."""
_WORD = re.compile(r"[A-Za-zÀ-ÿ][\w'’.-]*|\d[\d:./-]*(?:am|pm)?", re.UNICODE)
_KEBAB = re.compile(
    r"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?:api|service|app|web|cli|bot|db|ui|server|worker|core|"
    r"lib|sdk|site|\d+)\b"
)
"""A lower-case identifier ("payroll-api"): a project's name as developers write it."""
_HANDLE = re.compile(r"(?<![\w/])[#@][A-Za-z][\w-]*")
"""A channel or account ("#general", "@sam"): a value like a name."""
_WRONG = re.compile(
    r"(?:,|\bbut)\s*not\s+(?:in\s+|at\s+|on\s+)?([A-Za-zÀ-ÿ][\w'-]*)", re.IGNORECASE
)
SECOND_PERSON = frozenset({"you", "your", "ur", "u", "you're", "youre", "yours", "you’re"})
_THIRD_PERSON = frozenset({"he", "she", "they", "his", "her", "their", "he's", "she's", "they're"})
_POSSESSIVES = frozenset({"my", "our"})
RELATIVES = frozenset(
    """sister brother mum mom mother dad father partner wife husband girlfriend boyfriend son
    daughter friend roommate flatmate colleague coworker cousin aunt uncle grandma grandpa
    niece nephew neighbour neighbor""".split()  # noqa: SIM905
)
"""Whose a statement is when it starts "my sister …": a subject of its own, not the user."""
_POSSESSIVE = re.compile(r"['’]s$")
_RELATIVE_PRONOUNS = frozenset({"who", "which", "whose"})
FIRST_PERSON = frozenset(
    {
        "i'd",
        "i'll",
        "i’m",
        "i’d",
        "i’ll",
        "id",
        "i",
        "i'm",
        "im",
        "i've",
        "ive",
        "my",
        "me",
        "we",
        "we're",
        "our",
        "us",
    }
)


_COMMON_STARTS = (
    STOPWORDS
    | FILLER
    | CHANGE
    | frozenset(
        """the we our let let's please pls plz thanks stop start keep send post remind use make
        put add remove don't dont do can could would will also so note sorry first second third
        firstly secondly thirdly lastly next meanwhile however besides plus every many several
        tonight tomorrow recently lately""".split()  # noqa: SIM905
    )
)
"""Sentence-initial words that are not names."""
SLOT_STEMS = frozenset(stem(s) for s in SLOTS)
"""The stems of `SLOTS`, as claim frames hold their words."""
EVENT_STEMS = frozenset(
    stem(s)
    for s in """deadline due meeting offsite standup appointment flight trip launch release demo
    review interview wedding party birthday bday engagement ceremony go-live golive""".split()  # noqa: SIM905
)
"""Events whose value is a date: the date says when it happens."""
_GOT_JOB = re.compile(
    r"\b(?:got|landed|accepted|took|start(?:ed|ing)?(?: at)?)\s+(?:the|a|my)\s+(?:new\s+)?"
    r"(?P<org>[\w&'’-]+)\s+job\b",
    re.IGNORECASE,
)
""""I GOT THE TIDAL JOB": the employer is the word before "job"."""
_APPOSED = re.compile(
    r"\b(?:boss|manager|supervisor|team lead)\s+([a-z][a-z'-]{2,})\b(?!\s+(?:is|was)\s+(?:my|our|the)\b)"
)
"""A name after whom it names, in lower-case chat ("new boss marcus is lowkey intense")."""
_NOT_NAMES = frozenset(
    """wants want says said thinks told asked keeps hates loves likes gave makes made just also
    really still finally literally basically again today tomorrow yesterday tho though and but
    who which that when meeting meetings review call""".split()  # noqa: SIM905
)


def fold(text: str) -> str:
    """Text as values compare: case and accents folded."""
    return fold_accents(text.casefold())


def fold_accents(word: str) -> str:
    """A word without its accents (Inês, Ines)."""
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


SPEAKER = re.compile(r"^(?P<who>[A-ZÀ-Þ][\w'’-]*(?: [A-ZÀ-Þ][\w'’-]*){0,2}) said: ")
"""What someone other than the user wrote, as an import attributes it ("Dana Kim said: …")."""
