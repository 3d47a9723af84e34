"""Typed messages between the workers (which touch the database) and the widgets (which don't).

Workers run in threads and only ever `post_message` (thread-safe); handlers run on the event
loop and only ever update widgets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from textual.message import Message

from tiermem.core.engine import Memory
from tiermem.core.errors import TiermemError
from tiermem.tui.app.widgets.detail import DetailData

T = TypeVar("T")


def describe_error(exc: BaseException) -> str:
    """One line for a notification: the message of an expected error, the type otherwise."""
    if isinstance(exc, TiermemError):
        return exc.message
    return f"internal error ({type(exc).__name__}): {' '.join(str(exc).split())[:200]}"


class Loaded(Message, Generic[T], bubble=False):
    """A screen's data, fetched by its load worker."""

    def __init__(self, data: T) -> None:
        super().__init__()
        self.data = data


class MemoryOpened(Message):
    """The app opened (or switched to) an agent's memory."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory


class DataChanged(Message):
    """Another process (an agent) committed to the database: open screens reload."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DataChanged)


@dataclass
class ActionDone(Message):
    """A curation action finished; `text` is what to tell the person."""

    text: str
    undo_hint: bool = False


@dataclass
class ActionFailed(Message):
    """A worker failed; `text` is a one-line reason (never a traceback)."""

    text: str
    title: str = "tiermem"
    reload: bool = False
    """The failed work may still have changed what screens show (an error it recorded)."""


class DetailLoaded(Message, bubble=False):
    """One memory's detail, for the pane beside a table."""

    def __init__(self, data: DetailData | None, serial: int) -> None:
        super().__init__()
        self.data = data
        self.serial = serial
