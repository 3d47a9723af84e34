"""What a planner needs to know about the memory it imports into (without writing to it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlanContext:
    """The hot projects (they name `projects/<name>` categories), the time now, the trivial
    filter's word count."""

    now: float
    projects: tuple[str, ...] = field(default_factory=tuple)
    min_words: int = 3
