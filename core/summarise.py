"""Extractive summaries without a model: the sentences that carry a text's most frequent content
words, a one-sentence abstract, and the key topics (proper-noun phrases first)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from tiermem.core.terms import STOPWORDS

ABSTRACT_CHARS = 200
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W_][\w'-]*")
_PROPER = re.compile(r"\b[A-Z][\w-]*(?:[ \t]+(?:[A-Z][\w-]*|of|de|da|von))*(?<!of)(?<!de)\b")


def sentences(texts: Sequence[str]) -> list[str]:
    """Every sentence of `texts`, whitespace collapsed, in order."""
    out = []
    for text in texts:
        for piece in _SENTENCE.split(text):
            sentence = " ".join(piece.split())
            if len(_WORD.findall(sentence)) >= 3:
                out.append(sentence)
    return out


def content_words(text: str) -> list[str]:
    """Words that carry content: no stopwords, nor their contractions ("i'll", "we're")."""
    words = (w.casefold().strip("'-") for w in _WORD.findall(text))
    return [
        w for w in words if len(w) > 2 and w not in STOPWORDS and w.split("'")[0] not in STOPWORDS
    ]


def ranked_sentences(texts: Sequence[str]) -> list[tuple[float, int, str]]:
    """(score, position, sentence), best first: the mean document frequency of a sentence's
    content words, so a sentence about what the conversation keeps returning to wins."""
    found = sentences(texts)
    words = [content_words(s) for s in found]
    freq = Counter(w for ws in words for w in set(ws))
    scored = []
    for i, (sentence, ws) in enumerate(zip(found, words, strict=True)):
        if ws:
            scored.append((sum(freq[w] for w in ws) / len(ws) ** 0.5, i, sentence))
    return sorted(scored, key=lambda x: (-x[0], x[1]))


def summary(texts: Sequence[str], max_chars: int) -> str:
    """The best sentences, in their original order, within `max_chars`."""
    chosen: list[tuple[int, str]] = []
    used = 0
    for _, i, sentence in ranked_sentences(texts):
        if used + len(sentence) + 1 > max_chars:
            continue
        chosen.append((i, sentence))
        used += len(sentence) + 1
    if not chosen:
        return clip(" ".join(" ".join(texts).split()), max_chars)
    return " ".join(s for _, s in sorted(chosen))


def abstract(text: str, max_chars: int = ABSTRACT_CHARS) -> str:
    """One sentence (the best of `text`), at most `max_chars` characters."""
    ranked = ranked_sentences([text])
    best = ranked[0][2] if ranked else " ".join(text.split())
    return clip(best, max_chars)


def clip(text: str, max_chars: int) -> str:
    """`text` cut at a word boundary to at most `max_chars` characters (… marks a cut)."""
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return cut + "…"


_DANGLING = STOPWORDS | frozenset(
    [
        "without",
        "within",
        "before",
        "after",
        "since",
        "until",
        "about",
        "against",
        "between",
        "into",
        "onto",
        "over",
        "under",
        "via",
        "per",
        "than",
        "like",
        "near",
        "toward",
        "towards",
        "upon",
        "across",
        "through",
        "during",
        "except",
    ]
)


def end_on_phrase(short: str, whole: str, max_bytes: int) -> str:
    """`short` (the first words of `whole` that fit under `max_bytes` UTF-8 bytes) as a phrase
    a reader can take in: when words were left out it ends on a content word, never on a
    dangling 'without' or 'the', and an ellipsis marks the cut, still under `max_bytes`."""
    if not short or short == whole or not whole.startswith(short):
        return short
    words = short.split()
    while words and (
        words[-1].casefold() in _DANGLING or len((" ".join(words) + "…").encode()) >= max_bytes
    ):
        words.pop()
    return " ".join(words) + "…" if words else short


def topics(texts: Sequence[str], limit: int = 8) -> list[str]:
    """Proper-noun phrases (not only sentence openers), then the most frequent content words."""
    counts: Counter[str] = Counter()
    for sentence in sentences(texts):
        for match in _PROPER.finditer(sentence):
            phrase = match.group(0).removesuffix(" I")  # "First I'll": the speaker, no topic
            if match.start() == 0 and " " not in phrase:
                continue
            if phrase.casefold() not in STOPWORDS and len(phrase) > 1:
                counts[phrase] += 1
    out = [p for p, _ in counts.most_common(limit)]
    if len(out) < limit:
        words = Counter(w for t in texts for w in content_words(t))
        known = {p.casefold() for p in out}
        out += [w for w, n in words.most_common(limit * 2) if n > 1 and w not in known]
    return out[:limit]
