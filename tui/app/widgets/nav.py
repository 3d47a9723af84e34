"""The top bar: the app's name, one clickable tab per screen (with its key), and the agent."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

SCREENS: tuple[tuple[str, str, str], ...] = (
    ("1", "dashboard", "Dashboard"),
    ("2", "tree", "Tree"),
    ("3", "memories", "Memories"),
    ("4", "hot", "Hot"),
    ("5", "metrics", "Metrics"),
    ("6", "sync", "Sync"),
    ("7", "graph", "Graph"),
)


class NavTab(Static):
    """One screen's tab; a click switches to it."""

    def __init__(self, key: str, mode: str, title: str, current: bool) -> None:
        super().__init__(f"[b]{key}[/b] {title}", classes="-current" if current else "")
        self.mode = mode

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.app.switch_mode(self.mode)


class AgentLabel(Static):
    """The agent whose memory is shown (click to switch)."""

    async def on_click(self, event: events.Click) -> None:
        event.stop()
        await self.app.run_action("switch_agent")


class NavBar(Horizontal):
    def __init__(self, current: str, agent_id: str) -> None:
        super().__init__()
        self.current = current
        self.agent_id = agent_id

    def compose(self) -> ComposeResult:
        yield Static("tiermem", id="brand")
        for key, mode, title in SCREENS:
            yield NavTab(key, mode, title, mode == self.current)
        yield AgentLabel(f"@{self.agent_id}", id="nav-agent")

    def set_agent(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.query_one(AgentLabel).update(f"@{agent_id}")
