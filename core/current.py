"""Answers that use the current fact: a search's candidates arranged so that what is true now
(or at the `as_of` date asked for) comes first.

A memory superseded by then ranks lower and says so ("superseded on 2026-10-17 by …"); the
memory that replaced it joins the results where the stale one would have ranked, even when
the query's words did not find it ("where do I live now?" finds "I live in Lisbon", whose
successor "I moved to Porto" shares no word with the question), and always ranks above it.
With `as_of`, memories whose fact started later are left out."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

from tiermem.core.db import Database, Row
from tiermem.core.ranking import (
    ROW_CREATED,
    ROW_FIELDS,
    ROW_ID,
    ROW_SUPERSEDED_AT,
    ROW_SUPERSEDED_BY,
    ROW_TEXT,
    ROW_VALID_FROM,
    Candidate,
    with_count,
)
from tiermem.core.rows import MemoryRow

ANSWERS = "answers: "
"""How an answer's reason starts (the newest statement's, the graph's): context injects it
whatever words it shares with the question."""
QUESTION = re.compile(
    r"\?|\b(?:what|whats|what's|where|wheres|who|whos|whom|whose|which|when|whens|how|hows|"
    r"am i|do i|does|did)\b",
    re.IGNORECASE,
)
"""A question (a wh-word, "do I", a question mark): only a question is given an answer."""
PAST = re.compile(
    r"\b(?:did|was|were|had|first|originally|used to|before|previous(?:ly)?|ago|back then|"
    r"last (?:week|month|year|time)|in (?:19|20)\d\d)\b",
    re.IGNORECASE,
)
"""A question about the past ("when did I first…", "where did I live before…"): what holds
now does not answer it; with an as-of date, what held then does."""
STALE_FACTOR = 0.5
"""What a superseded memory's score is multiplied by."""
MAX_CHAIN = 20


def since(row: Row) -> float:
    """When a row's fact became true."""
    valid = row[ROW_VALID_FROM]
    return float(row[ROW_CREATED] if valid is None else valid)


def stale_at(row: Row, when: float) -> bool:
    ended = row[ROW_SUPERSEDED_AT]
    return ended is not None and float(ended) <= when


def arrange(
    db: Database, agent_id: str, ranked: list[Candidate], now: float, as_of: float | None = None
) -> list[Candidate]:
    """`ranked` (best first) with superseded memories below what replaced them."""
    when = now if as_of is None else as_of
    if as_of is not None:
        ranked = [c for c in ranked if since(c.row) <= as_of]
    if not any(stale_at(c.row, when) for c in ranked):
        return ranked
    by_id = {str(c.row[ROW_ID]): c for c in ranked}
    pairs: list[tuple[Candidate, Candidate]] = []
    for c in list(ranked):
        if not stale_at(c.row, when):
            continue
        successor = _current_successor(db, agent_id, c.row, when, by_id)
        ended = day(float(c.row[ROW_SUPERSEDED_AT]))
        if successor is None:
            c.supersession = f"no longer true since {ended}"
        else:
            c.supersession = (
                f"superseded on {ended} by {successor.row[ROW_ID]}: "
                f"{_short(str(successor.row[ROW_TEXT]))}"
            )
            if str(successor.row[ROW_ID]) not in by_id:
                _stand_in(successor, c)
                by_id[str(successor.row[ROW_ID])] = successor
                ranked.append(successor)
            pairs.append((c, successor))
        c.score *= STALE_FACTOR
    for old, new in pairs:  # every reader that sorts by score keeps the current one first
        new.score = max(new.score, old.score * (1 + 1e-6) + 1e-9)
    ranked.sort(key=lambda c: (-c.score, c.seq))
    return ranked


def answer_first(
    db: Database,
    slot: int,
    query: str,
    ranked: list[Candidate],
    when: float,
    where: tuple[str, list[object]],
) -> list[Candidate]:
    """`ranked` with the newest statement of what a question asks first ("who is my manager
    now?" → the latest "I report to …"), found even when the question shares no word with it."""
    if not QUESTION.search(query):
        return ranked
    from tiermem.core import answers  # the statement rules load only for a question

    question = answers.asked(query)
    found = None if question is None else answers.newest(db, slot, question, when, where)
    if found is None:
        return _latest_first(query, ranked, when)
    seq, row, why = found
    answer = next((c for c in ranked if c.seq == seq), None)
    if answer is None:
        answer = Candidate(seq, with_count(row), found_by="answer")
        ranked.append(answer)
    return _lift(answer, ranked, why)


NEWEST_STATEMENT = f"{ANSWERS}the newest statement of it"
"""How the reason of an answer from the memory's own newest statement starts."""
PREDICATES = {
    "~residence": "lives_in",
    "~employer": "works_at",
    "~manager": "reports_to",
    "~role": "role",
}
"""The graph's predicate for each attribute a question may ask."""


def answered_attributes(
    query: str, hits: Sequence[tuple[str | None, MemoryRow]]
) -> dict[str, float]:
    """The graph predicates that a result answering `query` from the newest statement states,
    with when that statement's fact began: a graph fact of one that began earlier is stale
    (the graph did not read the change)."""
    said = next((m for via, m in hits if via and via.startswith(NEWEST_STATEMENT)), None)
    if said is None:
        return {}
    from tiermem.core import answers

    question = answers.asked(query)
    began = said.valid_from if said.valid_from is not None else said.created_at
    anchors = () if question is None else question.anchors
    return {PREDICATES[a]: float(began) for a in anchors if a in PREDICATES}


def _latest_first(query: str, ranked: list[Candidate], when: float) -> list[Candidate]:
    """`ranked` with the newest statement on a present-tense question's topic first."""
    from tiermem.core import answers

    about = answers.topic(query)
    at = None if about is None else answers.newest_on_topic(about, ranked, when)
    if at is None:
        return ranked
    why = f"{ANSWERS}the latest said about it ({day(float(ranked[at].row[ROW_CREATED]))})"
    return _lift(ranked[at], ranked, why)


def _lift(answer: Candidate, ranked: list[Candidate], why: str) -> list[Candidate]:
    """`answer` ranked first, relevant enough to inject, explained by `why`."""
    top = max((c.score for c in ranked if c is not answer), default=0.0)
    answer.score = max(answer.score, top * (1 + 1e-6) + 1e-9)
    answer.relevance = max(answer.relevance, 1.0)
    answer.via = why
    ranked.sort(key=lambda c: (-c.score, c.seq))
    return ranked


def _current_successor(
    db: Database, agent_id: str, row: Row, when: float, known: dict[str, Candidate]
) -> Candidate | None:
    """The end of `row`'s chain of replacements as of `when` (None for a closed fact)."""
    nxt = str(row[ROW_SUPERSEDED_BY])
    found: Candidate | None = None
    for _ in range(MAX_CHAIN):
        if not nxt:
            break
        candidate = known.get(nxt) or _load(db, agent_id, nxt)
        if candidate is None or since(candidate.row) > when:
            break
        found = candidate
        if not stale_at(candidate.row, when):
            break
        nxt = str(candidate.row[ROW_SUPERSEDED_BY])
    return found


def _load(db: Database, agent_id: str, memory_id: str) -> Candidate | None:
    row = db.query_one(
        f"SELECT m.seq, {ROW_FIELDS} FROM memories m WHERE m.agent_id = ? AND m.id = ?",
        (agent_id, memory_id),
    )
    return None if row is None else Candidate(seq=int(row[0]), row=with_count(row[1:]))


def _stand_in(successor: Candidate, stale: Candidate) -> None:
    """A successor the search did not find takes the stale memory's place in the ranking."""
    successor.score = stale.score
    successor.relevance = stale.relevance
    successor.found_by = stale.found_by
    successor.supersession = f"the current version of {stale.row[ROW_ID]}"
    successor.stands_for = str(stale.row[ROW_TEXT])


def day(ts: float) -> str:
    """A moment as its UTC day (2026-10-17), as explanations name it."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).date().isoformat()


def _short(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"
