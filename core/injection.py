"""What `context` injects beyond the always-loaded part: memories whose relevance reaches the
threshold, and episode abstracts within their own small budget.

Relevance here is absolute, unlike retrieval's ranking (normalised to the best candidate, so the
best match of an unrelated message is 1 too): the share of the message's search terms a memory
contains, with an entity the graph linked it through counting as one matched term, and the
embedding similarity when that is higher (vector modes)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tiermem.core import episodes
from tiermem.core.current import ANSWERS
from tiermem.core.distill import signals
from tiermem.core.distill.cues import GREETING_WORDS, QUESTION_FILLER, SMALL_TALK, WH_WORDS
from tiermem.core.errors import InvalidInput
from tiermem.core.ranking import Hit
from tiermem.core.terms import STOPWORDS, TERM, matched_terms, stem
from tiermem.core.tokens import count_tokens

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

EPISODES_HEADING = "## Related conversations"
EPISODE_CANDIDATES = 5


def is_trivial(message: str, min_words: int) -> bool:
    """Greetings, thanks and acknowledgements ("hi", "thanks!", "ok cool", "how are you?"):
    nothing to look up. A message with a word of content is never trivial when it asks (a
    question mark, a wh-word, also "whats", "am i …") or names someone or something beyond
    that word ("Diego's birthday"); otherwise it needs `min_words` content words."""
    text = SMALL_TALK.sub(" ", message)
    words = [w.casefold() for w in TERM.findall(text)]
    content = [w for w in words if len(w) > 1 and w not in _NOT_CONTENT]
    if len(content) >= min_words:
        return False
    if not content:
        return True
    if "?" in text or any(w in WH_WORDS for w in words) or _YES_NO.match(text):
        return False
    named = {w.casefold() for name in signals.names(text) for w in TERM.findall(name)}
    return not (named and set(content) - named)


_NOT_CONTENT = STOPWORDS | GREETING_WORDS | WH_WORDS
_YES_NO = re.compile(
    r"\s*(?:am|are|is|was|were|do|does|did|have|has|had|can|will|should)\s+"
    r"(?:i|we|you|u|my|our|the|it|he|she|they)\b",
    re.IGNORECASE,
)
"""A question without its mark ("am i still doing pottery")."""


def asked(terms: Sequence[str]) -> list[str]:
    """The terms that say what a message asks about: not its wh-words or politeness ("whats",
    "please", "tell me"), which no memory needs to contain."""
    kept = [t for t in terms if t not in WH_WORDS and t not in QUESTION_FILLER]
    return kept or list(terms)


def check_threshold(floor: float) -> float:
    if not 0.0 <= floor <= 1.0:
        raise InvalidInput(f"threshold must be between 0 and 1 (got {floor})")
    return floor


def relevance(hit: Hit, terms: Sequence[str]) -> float:
    """0..1: how much of the message this memory is about (module doc)."""
    e = hit.explanation
    if e.via and e.via.startswith(ANSWERS):
        return 1.0  # what the question asks, whatever words it shares with it
    wanted = asked(terms)
    if not wanted:
        return 0.0
    found = sum(1 for t in e.matched_terms if t in wanted)
    matched = found + (1 if e.via and not e.via.startswith("episode") else 0)
    share = min(1.0, matched / len(wanted))
    return max(share, e.similarity or 0.0)


def above(hits: list[Hit], terms: Sequence[str], floor: float) -> tuple[list[Hit], float]:
    """The hits whose relevance reaches `floor`, in order, and the best relevance of all; a
    kept memory that was superseded brings the one that replaced it, just before it."""
    scored = [(relevance(h, terms), h) for h in hits]
    kept = [h for s, h in scored if s >= floor]
    return _with_successors(kept, hits), max((s for s, _ in scored), default=0.0)


def _with_successors(kept: list[Hit], hits: list[Hit]) -> list[Hit]:
    by_id = {h.memory.id: h for h in hits}
    kept_ids = {h.memory.id for h in kept}
    out: list[Hit] = []
    placed: set[str] = set()
    for hit in kept:
        new = hit.memory.superseded_by
        if new in by_id and new not in kept_ids and new not in placed:
            out.append(by_id[new])
            placed.add(new)
        if hit.memory.id not in placed:
            out.append(hit)
            placed.add(hit.memory.id)
    return out


@dataclass
class EpisodeBlock:
    lines: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    tokens: int = 0


def episode_block(
    mem: Memory, query: str, terms: Sequence[str], budget: int, threshold: float
) -> EpisodeBlock:
    """Abstracts of the episodes that match the message at or above `threshold` (the same
    term share as memories), best first, within `budget` tokens (heading included)."""
    block = EpisodeBlock()
    terms = asked(terms)
    if budget <= 0 or not terms:
        return block
    stems = {stem(t): t for t in terms}
    used = count_tokens(f"\n{EPISODES_HEADING}\n\n")
    for episode, _ in episodes.search(mem.db, mem.agent_id, query, EPISODE_CANDIDATES):
        text = " ".join((episode.summary, *episode.topics, *episode.participants))
        if len(matched_terms(text, stems)) / len(terms) < threshold:
            continue
        day = episodes.iso(episode.started_at)[:10]
        line = f"- {day}: {episode.abstract} (episode {episode.id})"
        cost = count_tokens(line + "\n")
        if used + cost > budget:
            continue
        block.lines.append(line)
        block.ids.append(episode.id)
        used += cost
    block.tokens = used if block.lines else 0
    return block


def section(block: EpisodeBlock) -> str:
    return f"\n{EPISODES_HEADING}\n\n" + "\n".join(block.lines) + "\n" if block.lines else ""


def assemble(
    head: str, memories: list[tuple[str, Hit]], episodes_text: str, heading: str, budget: int
) -> tuple[str, list[Hit], str]:
    """`head`, the memory lines under `heading`, then the episodes, dropping the last memory
    (then the episodes) until the whole text fits `budget`: BPE merges across lines can cost
    a token more than the sum of their counts."""
    kept = list(memories)
    while True:
        lines = [line for line, _ in kept]
        text = head + (heading + "\n".join(lines) + "\n" if lines else "") + episodes_text
        if count_tokens(text) <= budget:
            return text, [hit for _, hit in kept], episodes_text
        if kept:
            kept.pop()
        else:
            episodes_text = ""


def answer_first(text: str, head: str, facts: str, episodes: str, budget: int) -> str | None:
    """`text` (`head`, `facts`, the memories, `episodes`) with what was found for the message
    before the always-loaded `head`, the ranked memories first: a model reads the answer
    before hot memory's older lines on the same subject. None when nothing was found, or the
    new seams would cost more than `budget` (BPE merges differ)."""
    found = text[len(head) + len(facts) : len(text) - len(episodes)]
    parts = [p.strip("\n") for p in (found, facts, episodes) if p.strip()]
    reordered = "\n\n".join([*parts, head])
    return reordered if parts and count_tokens(reordered) <= budget else None
