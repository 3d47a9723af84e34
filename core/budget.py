"""The one token-budget fit used by every budgeted read (`retrieve --budget`, recall, the MCP
tools, the context block's memories).

One unit everywhere: the cl100k tokens of a memory's text (what `store` reports as its token
cost). Ranked items are taken best first while they fit; the best item always comes back when
the budget allows any text at all, shortened with `MARKER` if it is longer than the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from tiermem.core.tokens import count_tokens, head

T = TypeVar("T")

MARKER = " […]"
"""What ends a text cut to fit a budget (one token)."""


def shorten(text: str, budget: int) -> str | None:
    """`text` cut to at most `budget` tokens, the marker included; None if not even one token
    of the text fits beside the marker."""
    if count_tokens(text) <= budget:
        return text
    room = budget - count_tokens(MARKER)
    if room < 1:
        return None
    while room > 0:
        cut = head(text, room).rstrip() + MARKER
        if count_tokens(cut) <= budget:
            return cut
        room -= 1
    return None


def fit(
    ranked: Sequence[T],
    cost: Callable[[T], int],
    budget: int | None,
    limit: int,
    shrink: Callable[[T, int], T | None] | None = None,
) -> list[T]:
    """The best `limit` items whose costs add up to at most `budget`, best first. The best item
    is always kept: if it alone is over the budget, `shrink(item, budget)` shortens it (and
    nothing else is added); an item that does not fit is skipped for smaller ones after it."""
    if budget is None:
        return list(ranked[:limit])
    chosen: list[T] = []
    used = 0
    for i, item in enumerate(ranked):
        if len(chosen) == limit:
            break
        price = cost(item)
        if used + price <= budget:
            chosen.append(item)
            used += price
        elif i == 0 and shrink is not None:
            small = shrink(item, budget)
            return [small] if small is not None else []
    return chosen
