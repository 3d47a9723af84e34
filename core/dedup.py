"""Near-duplicate detection for writes (the dedup of the original `memory_store` tool).

Two texts are near-duplicates when their normalized forms (NFKC, case-folded, punctuation and
spacing ignored) reach a similarity threshold (difflib's ratio, 0..1) **and** they say the same
numbers, the same URLs and the same negations, and every content word one has and the other
lacks is a spelling variant of one the other has: "port is 8080" and "port is 8081", "we use X"
and "we do not use X", "the EvoClaw team" and "the blog team" are different facts however
similar their letters; "the certificate" and "the certificates." are one.

`NearIndex` holds the newest memories of one agent in memory, bucketed by that guard and indexed
by word, so a lookup compares only texts that share at least half of their content words.
`candidates_index` fills one with only the stored texts that share half of the words of a few
new ones, counted through the full-text index: a one-fact write reads a handful of rows, not
the whole window.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import TYPE_CHECKING

from tiermem.core.metadata import find_urls
from tiermem.core.terms import NEGATION, STOPWORDS, TERM, fts_match

if TYPE_CHECKING:
    from tiermem.core.db import Database

_PUNCT = re.compile(r"[^\w\s]|_")
_DIGITS = re.compile(r"\d+")
_WORDS = re.compile(r"\w+")

WORD_VARIANT = 0.8
"""Similarity from which two words count as spellings of one word."""

Guard = tuple[tuple[str, ...], frozenset[str], frozenset[str]]


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def near_key(text: str, folded: str | None = None) -> str:
    """The text as near-duplicate detection sees it (`folded`: `text` already folded)."""
    return " ".join(_PUNCT.sub(" ", _fold(text) if folded is None else folded).split())


def guard(text: str, folded: str | None = None) -> Guard:
    """What must be equal for two texts to be the same fact: numbers, URLs, negations."""
    folded = _fold(text) if folded is None else folded
    negations = frozenset(m.group(0).replace("’", "'") for m in NEGATION.finditer(folded))
    return (tuple(_DIGITS.findall(folded)), negations, frozenset(find_urls(text)))


def similarity(a: str, b: str) -> float:
    """difflib ratio of the normalized texts (1.0 = same once normalized)."""
    return SequenceMatcher(None, near_key(a), near_key(b), autojunk=False).ratio()


@dataclass(frozen=True)
class _Entry:
    """A memory in the near-duplicate index: its id and normalised key."""

    id: str
    key: str
    words: frozenset[str]


def _content_words(key: str) -> frozenset[str]:
    words = _WORDS.findall(key)
    content = [w for w in words if w not in STOPWORDS]
    return frozenset(content or words)


def words_compatible(a: frozenset[str], b: frozenset[str]) -> bool:
    """Every content word one text has and the other lacks is a spelling variant of one the
    other has ("certificate"/"certificates", "recieve"/"receive"). A different word — "EvoClaw"
    for "blog", "likes" for "hates", an added "afternoon" — makes a different fact."""
    only_a, only_b = a - b, b - a
    return all(
        any(SequenceMatcher(None, w, v).ratio() >= WORD_VARIANT for v in others)
        for mine, others in ((only_a, only_b), (only_b, only_a))
        for w in mine
    )


class NearIndex:
    """Texts by id, for `find`: the most similar stored text at or above `threshold`."""

    def __init__(self, threshold: float, capacity: int | None = None) -> None:
        self.threshold = threshold
        self.capacity = capacity
        """Beyond this many entries the oldest ones leave (None: no limit)."""
        self._entries: dict[str, tuple[Guard, _Entry]] = {}
        self._buckets: dict[Guard, dict[str, dict[str, None]]] = {}
        """Per guard, word → the ids holding it (a dict: insertion order, O(1) removal)."""
        self._last: tuple[str, Guard, str, frozenset[str]] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def _analyse(self, text: str) -> tuple[Guard, str, frozenset[str]]:
        last = self._last
        if last is not None and last[0] == text:
            return last[1], last[2], last[3]
        folded = _fold(text)
        key = near_key(text, folded)
        result = (guard(text, folded), key, _content_words(key))
        self._last = (text, *result)
        return result

    def add(self, memory_id: str, text: str) -> None:
        if memory_id in self._entries:
            return
        where, key, words = self._analyse(text)
        entry = _Entry(memory_id, key, words)
        self._entries[memory_id] = (where, entry)
        postings = self._buckets.setdefault(where, {})
        for word in entry.words:
            postings.setdefault(word, {})[memory_id] = None
        if self.capacity is not None and len(self._entries) > self.capacity:
            self.remove(next(iter(self._entries)))  # the oldest entry

    def remove(self, memory_id: str) -> None:
        found = self._entries.pop(memory_id, None)
        if found is None:
            return
        where, entry = found
        postings = self._buckets.get(where, {})
        for word in entry.words:
            ids = postings.get(word)
            if ids is not None and memory_id in ids:
                del ids[memory_id]
                if not ids:
                    del postings[word]
        if not postings:
            self._buckets.pop(where, None)

    def find(self, text: str) -> list[tuple[str, float]]:
        """Stored ids similar enough to `text`, most similar first."""
        where, key, words = self._analyse(text)
        postings = self._buckets.get(where)
        if not postings or not words:
            return []
        shared: Counter[str] = Counter()
        for word in words:
            shared.update(postings.get(word, {}).keys())
        out: list[tuple[str, float]] = []
        for memory_id, n in shared.items():
            entry = self._entries[memory_id][1]
            if 2 * n < max(len(words), len(entry.words)):
                continue  # fewer than half of the content words in common
            matcher = SequenceMatcher(None, key, entry.key, autojunk=False)
            if (
                matcher.real_quick_ratio() >= self.threshold
                and matcher.quick_ratio() >= self.threshold
            ):
                ratio = matcher.ratio()
                if ratio >= self.threshold and words_compatible(words, entry.words):
                    out.append((memory_id, ratio))
        out.sort(key=lambda x: (-x[1], x[0]))
        return out

    def key_of(self, memory_id: str) -> str | None:
        found = self._entries.get(memory_id)
        return None if found is None else found[1].key


PROBE_MAX_WORDS = 64
"""A text with more content words than this is looked up in the whole window instead: each
word is one term of the lookup's statement."""


CHUNK_MAX_WORDS = 3
"""A text with a longer run of words between spaces (a URL, code) goes to the whole window:
each word's query holds the run around it as a phrase, and long phrases make the lookup slow."""


def word_forms(text: str) -> dict[str, set[str]] | None:
    """`text`'s content words as `NearIndex` sees them, each with the raw pieces of `text` that
    hold it: a word and each whitespace-separated chunk around it, as typed. The full-text
    index reads those with its own tokenizer, which splits and folds some text differently
    ("Straße", a code point Python does not know as a letter). None when a chunk holds more
    than `CHUNK_MAX_WORDS` words."""
    forms: dict[str, set[str]] = {w: {w} for w in _content_words(near_key(text))}
    for chunk in {*text.split(), *TERM.findall(text)} - {""}:
        if "\x00" in chunk:
            continue  # FTS5 would read a NUL as the end of the query (stores refuse NUL)
        words = near_key(chunk).split()
        if len(words) > CHUNK_MAX_WORDS:
            return None
        for word in words:
            if word in forms:
                forms[word].add(chunk)
    return forms


def candidates_index(
    db: Database, agent_rows: tuple[int, int], window: int, texts: list[str], threshold: float
) -> NearIndex | None:
    """A `NearIndex` of the memories among the agent's newest `window` (rowids in `agent_rows`)
    that share at least half of the content words of one of `texts`, counted through the
    full-text index: every memory `find` could return for them, since `find` asks for that
    half. None (search the whole window) when a text has more than `PROBE_MAX_WORDS` words, a
    run longer than `CHUNK_MAX_WORDS`, or is not in NFKC form: the full-text index holds the
    raw text, and a compatibility character ("㋀", a ligature) may be a word to `NearIndex` and
    nothing to the index."""
    if not all(unicodedata.is_normalized("NFKC", t) for t in texts):
        return None
    looked_up = [word_forms(t) for t in texts]
    if any(forms is None or len(forms) > PROBE_MAX_WORDS for forms in looked_up):
        return None
    index = NearIndex(threshold)
    low, high = (str(n) for n in agent_rows)
    floor = db.scalar(
        "SELECT seq FROM memories WHERE seq BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER) "
        "ORDER BY seq DESC LIMIT 1 OFFSET ?",
        (low, high, window - 1),
    )
    rows = (low if floor is None else str(floor), high)
    for forms in filter(None, looked_up):
        for memory_id, text in _sharing_half(db, forms, rows):
            index.add(memory_id, text)
    return index


_ONE_WORD = (
    "SELECT rowid AS seq FROM memories_fts WHERE memories_fts MATCH ? "
    "AND rowid BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER)"
)


def _sharing_half(
    db: Database, forms: dict[str, set[str]], rows: tuple[str, str]
) -> list[tuple[str, str]]:
    """(id, text) of the memories in rowids `rows` whose text holds at least half of the words
    (any form of each), in rowid order."""
    union = " UNION ALL ".join([_ONE_WORD] * len(forms))
    params: list[object] = []
    for word in sorted(forms):
        params += ["text : (" + fts_match(sorted(forms[word])) + ")", *rows]
    found = db.query(
        f"SELECT m.id, m.text FROM (SELECT seq FROM ({union}) GROUP BY seq "
        "HAVING 2 * count(*) >= ?) AS shared JOIN memories m USING (seq) ORDER BY m.seq",
        [*params, len(forms)],
    )
    return [(str(r[0]), str(r[1])) for r in found]
