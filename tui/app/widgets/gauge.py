"""A one-line gauge: label, bar and value, coloured as it nears its limit."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.widget import Widget


class Gauge(Widget):
    """`label ████░░░░ value`; the bar fills with `used / limit` (no bar without a limit)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gauge--label",
        "gauge--ok",
        "gauge--warn",
        "gauge--full",
        "gauge--empty",
    }
    DEFAULT_CSS = """
    Gauge { height: 1; }
    Gauge > .gauge--label { text-style: bold; }
    Gauge > .gauge--ok { color: $success; }
    Gauge > .gauge--warn { color: $warning; }
    Gauge > .gauge--full { color: $error; }
    Gauge > .gauge--empty { color: $foreground 25%; }
    """
    LABEL_WIDTH = 6

    def __init__(self, label: str, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.label = label
        self.used = 0.0
        self.limit: float | None = None
        self.value = "…"

    def set(self, used: float, limit: float | None, value: str) -> None:
        self.used, self.limit, self.value = used, limit, value
        self.refresh()

    def render(self) -> Text:
        width = self.size.width
        text = Text(
            self.label.ljust(self.LABEL_WIDTH), self.get_component_rich_style("gauge--label")
        )
        room = width - self.LABEL_WIDTH - len(self.value) - 2
        if self.limit and room >= 4:
            ratio = max(0.0, min(1.0, self.used / self.limit))
            filled = round(ratio * room)
            level = (
                "gauge--full" if ratio >= 0.95 else "gauge--warn" if ratio >= 0.8 else "gauge--ok"
            )
            text.append("█" * filled, self.get_component_rich_style(level))
            text.append("░" * (room - filled), self.get_component_rich_style("gauge--empty"))
            text.append("  ")
        text.append(self.value)
        return text
