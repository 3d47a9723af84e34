"""The newest statement of what a question asks about ("where do I live now?" → "We completed
the move to York on Saturday"): found by the words that name the attribute however it is
said, chosen by when it became true, and ranked first. An answer is then right even when
the question shares no word with it, or when supersession missed the change. A question of
now that names no attribute ("am I still vegan?") gets the latest statement on its topic."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tiermem.core import frames
from tiermem.core.current import NEWEST_STATEMENT, PAST, QUESTION, day, stale_at
from tiermem.core.db import Database, Row
from tiermem.core.frame_words import (
    CORRECTION,
    FIRST_PERSON,
    NEGATION,
    RELATIVES,
    SECOND_PERSON,
    SLOT_STEMS,
    SLOT_WORDS,
    SLOTS,
)
from tiermem.core.graph.phrases import OWNER
from tiermem.core.ranking import (
    ROW_CATEGORY,
    ROW_CREATED,
    ROW_FIELDS,
    ROW_ID,
    ROW_SUPERSEDED_BY,
    ROW_TEXT,
    Candidate,
)
from tiermem.core.terms import STOPWORDS, stem

POOL = 24
"""The newest statements of the attribute looked at (newest first, so older ones fall off)."""
PAGES = 4
"""Pages of `POOL` statements an as-of question reads back at most."""
AFTER_FIRST = 3
"""Statements read past the newest answering one: an older-said one may name a later date."""
DERIVED = ("dreams", "conversations")
"""Syntheses and conversation records restate facts; the statements themselves answer."""

KIND_WORDS: dict[str, str] = {
    "database": "database",
    "db": "database",
    "queue": "queue",
    "broker": "queue",
    "ci": "ci",
    "cloud": "cloud",
    "hosting": "cloud",
    "host": "cloud",
    "editor": "editor",
    "ide": "editor",
    "channel": "channel",
    "drink": "drink",
    "drinks": "drink",
    "language": "language",
    "framework": "framework",
    "statistical": "statistics",
    "statistics": "statistics",
    "stats": "statistics",
    "analytics": "analytics",
    "schedule": "scheduler",
    "scheduler": "scheduler",
    "scheduling": "scheduler",
    "tracker": "tracker",
}
"""Question words that ask which tool of a kind ("what message broker …" → a queue)."""
_ASKING = frozenset(
    """what whats what's where where's wheres who who's whos whom whose which when when's whens
    how hows do does did
    is are am was were now currently current present presently still right rn moment days
    lately anymore nowadays at the these use uses used using""".split()  # noqa: SIM905
)
"""Words of the asking, not of what is asked about."""
_LIGHT = frozenset(
    """doing done go goes going get gets getting got have has having keep keeps kept make makes
    thing things stuff anything anyone someone something like really many much long type kind
    good idea think feel tips""".split()  # noqa: SIM905
)
"""Verbs and fillers too common to say what a question is about."""
_GENERIC = frozenset(
    """morning mornings afternoon afternoons evening evenings night nights weekend weekends
    software tool tools app apps program service platform""".split()  # noqa: SIM905
)
"""When something is done, or what a tool is ("what do I drink in the morning", "which
software do we use"): not what the answer must name."""
NOW = re.compile(
    r"\b(?:still|now|currently|current|anymore|any more|these days|at the moment|rn|"
    r"right now|nowadays|lately|presently|present)\b|^\s*(?:am i|are we)\b",
    re.IGNORECASE,
)
"""A question that asks what holds now ("am I still vegan?", "what's my job title now"): the
latest said about its topic answers it; other questions keep their ranking."""
TOPIC_POOL = 10
"""The best-ranked results among which the newest on-topic statement is looked for."""
_ASKS = frozenset(
    """explain write create give help make tell list generate suggest recommend find show draft
    summarize summarise translate describe compare can could would please pls""".split()  # noqa: SIM905
)
"""How a request opens."""
LONG_TEXT = 60
"""Words past which a text is about many things."""
_TOKEN = re.compile(r"[^\W_]+")


_WORK_QUESTION = re.compile(
    r"\bwhere (?:do|does|did)\b.*\bwork(?:s|ing)?\b|\bwho (?:do|does) \w+(?: \w+)? work for\b",
    re.IGNORECASE,
)
"""A question of whom someone works for, which names no employer word."""


@dataclass(frozen=True)
class Asked:
    """What a question asks: the attribute's anchors and whose it is."""

    anchors: frozenset[str]
    """Slot tokens (~residence), one-value frame words (deadline) and tool kinds (queue)."""
    subject: str
    """"user", "~sister" (my sister), or "" when the question names no one."""
    names: frozenset[str]
    """Its other content words (folded): a statement about someone else must name one."""
    owner: frozenset[str] = frozenset()
    """The names whom it asks of goes by (folded; the user's, or "my husband" Chidi's): a
    statement about one of them is about them."""
    modifiers: frozenset[str] = frozenset()
    """Names just before what is asked ("my bday party"): a statement may leave them out."""


def asked(query: str) -> Asked | None:
    """What a question asks, or None for a statement or a question of no known attribute."""
    if not QUESTION.search(query):
        return None
    words = [frames.fold(w) for w in re.findall(r"[\w'’]+", query)]
    if not any(_may_anchor(w) for w in words):
        return None  # most questions name no one-value attribute: no parse
    claim = frames.claim_of(query, 0.0)
    frame = frozenset() if claim is None else claim.frame
    slotted = {w for w in frame if w.startswith("~") or w in SLOT_STEMS}
    if _WORK_QUESTION.search(query):
        slotted.add("~employer")  # "where does my husband work?"
    if "job" in words and "~role" not in slotted:
        slotted |= {"~role", "~employer"}  # "what was my job": the role or the employer
    subject = _subject(words)
    slotted.discard(subject[1:])  # "my husband's employer" asks not who he is
    kinds = {KIND_WORDS[w] for w in words if w in KIND_WORDS}
    anchors = frozenset(slotted | kinds)
    if not anchors:
        return None
    names = frozenset(
        w
        for w in words
        if w not in STOPWORDS and w not in _ASKING and w not in SLOT_WORDS
        if w not in KIND_WORDS
        and w not in _GENERIC
        and stem(w) not in slotted
        and len(w) > 1
        and w != subject[1:]  # "my husband" is whom it asks of, not what he is called
    )
    before = {words[i - 1] for i, w in enumerate(words) if i and stem(w) in slotted}
    return Asked(anchors, subject, names, modifiers=names & before)


def _may_anchor(word: str) -> bool:
    """A word that may name an attribute (a cheap look before the question is parsed)."""
    bare = word.removesuffix("s")
    return any(w in SLOT_WORDS or w in SLOTS or w in KIND_WORDS for w in (word, bare))


def _subject(words: list[str]) -> str:
    """The user ("I", "my"), a relative of theirs ("my sister"), or nobody named."""
    for i, word in enumerate(words):
        if word in {"my", "our"} and i + 1 < len(words) and words[i + 1] in RELATIVES:
            return "~" + words[i + 1]
        if word in FIRST_PERSON:
            return "user"
    return ""


def newest(
    db: Database, slot: int, question: Asked, when: float, where: tuple[str, list[object]]
) -> tuple[int, Row, str] | None:
    """The newest statement answering `question` that held at `when`: its seq, its row (the
    ranking's columns) and why it was chosen."""
    match = frames.fts_query_for(question.anchors)
    if not match:
        return None
    if question.subject[1:] in RELATIVES:  # "my husband" is Chidi when it says so
        question = replace(question, owner=named_as(db, slot, question.subject))
    if question.subject == "user":  # notes that say "Ravi moved to Pune" of their owner
        question = replace(question, owner=owner_names(db, slot))
    found = _said_by(db, slot, match, where, when)
    best = _best(db, question, found, when)
    if best is None and question.subject == "user" and question.names:
        loose = _loosened(question)
        best = _best(db, loose, found, when) if loose.names != question.names else None
    if best is None:
        return None
    return int(best[2][0]), best[2][1:], f"{NEWEST_STATEMENT} ({day(best[0])})"


def _loosened(question: Asked) -> Asked:
    """The question without what an answer may leave out: a word before what is asked ("my
    bday party": the party), or all of them when the user has one at a time (one role, one
    database: "what's my role at Kestrel")."""
    one = any(a.startswith("~") or a in KIND_WORDS.values() for a in question.anchors)
    return replace(question, names=frozenset() if one else question.names - question.modifiers)


def _best(
    db: Database, question: Asked, said: list[Row], when: float
) -> tuple[float, float, Row] | None:
    """The statement among `said` (newest first) whose answer began last: (began, said, row)."""
    best: tuple[float, float, Row] | None = None
    since_first = 0
    for found in said:
        if best is not None:
            since_first += 1
            if since_first > AFTER_FIRST:
                break  # older statements than these rarely became true later
        row = found[1:]
        if _derived(row):
            continue
        if stale_at(row, when) and _replaced_on_it(db, question, row):
            continue
        began = _answers(question, str(row[ROW_TEXT]), float(row[ROW_CREATED]), when)
        if began is None:
            continue
        if best is None or (began, float(row[ROW_CREATED])) > best[:2]:
            best = (began, float(row[ROW_CREATED]), found)
    return best


def _said_by(
    db: Database, slot: int, match: str, where: tuple[str, list[object]], when: float
) -> list[Row]:
    """The newest `POOL` statements matching `match` said by `when` (newest first): an as-of
    question pages back past what was said later."""
    sql, params = where
    upper = (slot << 32) + 0xFFFFFFFF
    kept: list[Row] = []
    for _ in range(PAGES):
        ids = _matching(db, slot, match, upper, POOL)
        if not ids:
            break
        marks = ", ".join("?" * len(ids))
        rows = db.query(
            f"SELECT m.seq, {ROW_FIELDS} FROM memories m WHERE m.seq IN ({marks}){sql} AND "
            "(m.superseded_at IS NULL OR m.superseded_at > ? OR m.superseded_by != '') "
            "ORDER BY m.seq DESC",
            [*ids, *params, when],
        )
        kept += [r for r in rows if float(r[1 + ROW_CREATED]) <= when]
        if len(ids) < POOL or len(kept) >= POOL:
            break
        upper = min(ids) - 1
    return kept


def _matching(db: Database, slot: int, match: str, upper: int, limit: int) -> list[int]:
    """The row ids of the agent's newest `limit` memories matching `match`, up to `upper`."""
    rows = db.query(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND rowid BETWEEN ? AND ? "
        "ORDER BY rowid DESC LIMIT ?",
        [match, slot << 32, upper, limit],
    )
    return [int(r[0]) for r in rows]


def owner_names(db: Database, slot: int) -> frozenset[str]:
    """The names the agent's graph knows the user by ("I'm Ravi Shankar": ravi shankar, ravi)."""
    rows = db.query(
        "SELECT n.name FROM entity_names n JOIN entities e ON e.agent_id = n.agent_id "
        "AND e.id = n.entity_id JOIN agents a ON a.agent_id = e.agent_id "
        "WHERE a.slot = ? AND e.name = ?",
        (slot, OWNER),
    )
    return frozenset(frames.fold(str(r[0])) for r in rows if str(r[0]) != OWNER)


NAMES_READ = 20
"""Statements naming a relative read for their name ("my husband Chidi")."""


def named_as(db: Database, slot: int, relative: str) -> frozenset[str]:
    """The names the agent's memory gives a relative ("~husband" → chidi), folded."""
    word = relative[1:]
    called = re.compile(
        rf"\bmy {word},?\s+([A-ZÀ-Þ][\w'’-]+)|\b([A-ZÀ-Þ][\w'’-]+),\s+my {word}\b",
        re.IGNORECASE,
    )
    ids = _matching(db, slot, f'"{word}"', (slot << 32) + 0xFFFFFFFF, NAMES_READ)
    marks = ", ".join("?" * len(ids)) or "NULL"
    texts = db.query(f"SELECT text FROM memories WHERE seq IN ({marks})", ids)
    names = {
        frames.fold(name)
        for (text,) in texts
        for m in called.finditer(str(text))
        for name in m.groups()
        if name and name[0].isupper() and frames.fold(name) not in STOPWORDS
    }
    return frozenset(names)


def _replaced_on_it(db: Database, question: Asked, row: Row) -> bool:
    """Whether what replaced a superseded statement speaks of the attribute asked about (a
    note of several facts replaced for its database still says where its writer lived)."""
    successor = db.scalar(
        "SELECT text FROM memories WHERE id = ? AND agent_id = (SELECT agent_id FROM memories "
        "WHERE id = ? LIMIT 1)",
        (row[ROW_SUPERSEDED_BY], row[ROW_ID]),
    )
    if successor is None:
        return True
    text = str(successor)
    if CORRECTION.search(text) or NEGATION.search(text):
        return True  # "actually it's Leeds, not Lees" corrects whatever the other said
    claims = frames.claims_of(text, float(row[ROW_CREATED]))
    return any(question.anchors & (c.frame | c.kinds) for c in claims)


def _derived(row: Row) -> bool:
    return str(row[ROW_CATEGORY]).startswith(DERIVED)


def _answers(question: Asked, text: str, said_at: float, when: float) -> float | None:
    """When the statement's answer became true, if one of its claims answers the question
    and held at `when`."""
    # notes about their owner in the third person ("…, he says") are the owner's
    notes = question.subject == "user" and question.owner and not _FIRST_PERSON.search(text)
    for claim in frames.claims_of(text, said_at):
        if not claim.values or claim.hypothetical:
            continue
        if not question.anchors & (claim.frame | claim.kinds):
            continue
        if notes and claim.subject in {"~he", "~she"}:
            claim = replace(claim, subject="user")
        if not _about(question, claim):
            continue
        began = claim.valid_from if claim.valid_from is not None else said_at
        if claim.future and (claim.valid_from is None or began > when):
            continue
        if said_at > when or began > when:
            continue
        return began
    return None


_FIRST_PERSON = re.compile(r"\b(?:i|i'm|im|me|my|mine|we|our|us)\b", re.IGNORECASE)
"""A text in the first person: its "he" and "she" are someone else."""


def _about(question: Asked, claim: frames.Claim) -> bool:
    """The claim is about whom the question asks: the same person, or (a question naming no
    one) a statement naming what it asks about."""
    named = {claim.subject, *claim.values, *claim.frame}
    mentions = bool(question.names & named) or bool({stem(n) for n in question.names} & named)
    if question.subject:  # "my sister Rita": her name or "my sister"; and what else it names
        whose = (
            claim.subject == question.subject
            or claim.subject in question.names
            or claim.subject in question.owner
        )
        return whose and (not question.names or mentions)
    if not question.names:
        return claim.subject == "user" or claim.subject in question.owner
    return mentions


def topic(query: str) -> frozenset[str] | None:
    """The stems of what a question about what holds now asks about ("do I still play
    football?" → football), or None for a statement or any other question."""
    if not QUESTION.search(query) or not NOW.search(query) or PAST.search(query):
        return None
    words = {frames.fold(w) for w in _TOKEN.findall(query)}
    kept = {
        stem(w)
        for w in words
        if len(w) > 1 and w not in STOPWORDS and w not in _ASKING and w not in _LIGHT
    }
    return frozenset(kept) or None


def on_topic(about: frozenset[str], text: str) -> bool:
    """Whether a statement (not a question, a request or a line said to someone) names at
    least half of what the question is about. A long text (a whole session, a long note)
    speaks of many things: the latest one is no answer."""
    words = _TOKEN.findall(text)
    if len(words) > LONG_TEXT or "?" in text or (words and words[0].casefold() in _ASKS):
        return False  # a question or a request asks; it does not say how things are
    opening = _TOKEN.findall(re.split(r"[.!?;]", text, maxsplit=1)[0])
    if any(w.casefold() in SECOND_PERSON for w in opening):
        return False  # "glad your reading day went well" is said to someone, of them
    return 2 * len(about & {stem(frames.fold(w)) for w in words}) >= len(about)


def newest_on_topic(about: frozenset[str], ranked: list[Candidate], when: float) -> int | None:
    """Among the best results, the position of the statement on the question's topic said
    last, when it was said after the best statement: a question of now ("am I still vegan?")
    is answered by the latest thing said about it (when said, not the date it names), never
    by one that stopped being true (which still counts as something else said about it)."""
    matching = [
        (float(c.row[ROW_CREATED]), -i, i, stale_at(c.row, when))
        for i, c in enumerate(ranked[:TOPIC_POOL])
        if not _derived(c.row)
        and float(c.row[ROW_CREATED]) <= when
        and on_topic(about, str(c.row[ROW_TEXT]))
    ]
    current = [(said, order, i) for said, order, i, stale in matching if not stale]
    if len(matching) < 2 or not current:
        return None
    said, _, latest = max(current)
    best = next(c for c in ranked if not _derived(c.row))
    later = ranked[latest] is best or said > float(best.row[ROW_CREATED])
    return latest if latest != 0 and later else None
