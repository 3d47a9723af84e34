"""The authoring form of a person's chats (`data/<person>/chats.txt`), read into dated messages.

A chats file is what a person said and what their assistant answered, written as plain text so
it reads like the conversation it is; `render.py` turns it into the chat export the person's
tool would produce. Layout:

    # comments (header only)
    format: chatgpt | claude-ai | claude-code | slack
    timezone: +01:00            # local times below are in this offset
    user: jess U01 Jess Moreau  # slack only: handle, id, real name (the first is the person)
    bot: otto B01               # slack only: the assistant app

    === 2026-07-04 10:12 | title (slack: #channel; claude-code: the project folder)
    > user
    text, over several lines if need be
    > assistant @10:31          # an explicit local time (or @YYYY-MM-DD HH:MM)
    text
    > tool Bash                 # claude-code: a tool call (the text is its input) ...
    > result                    # ... and its output

Without an explicit time a message comes a typing delay after the one before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

_CONV = re.compile(r"^=== (\d{4}-\d{2}-\d{2} \d{2}:\d{2}) \| (.+)$")
_MSG = re.compile(r"^> ([a-z][\w-]*)(?: (\w+))?(?: @(\d{4}-\d{2}-\d{2} )?(\d{2}:\d{2}))?\s*$")


@dataclass(frozen=True)
class Message:
    """One message: who spoke (the speaker's handle, `tool`/`result` for tool traffic)."""

    speaker: str
    text: str
    at: datetime
    tool: str = ""  # the tool's name for a `tool` message


@dataclass
class Chat:
    """One conversation (slack: one channel's stretch of a day)."""

    started: datetime
    title: str
    messages: list[Message] = field(default_factory=list)


@dataclass
class Script:
    """A person's whole chats file."""

    person: str
    format: str
    tz: timezone
    users: list[tuple[str, str, str]] = field(default_factory=list)  # handle, id, real name
    bots: list[tuple[str, str]] = field(default_factory=list)  # handle, id
    chats: list[Chat] = field(default_factory=list)

    @property
    def me(self) -> str:
        """The person's own speaker handle."""
        return self.users[0][0] if self.users else "user"

    def is_assistant(self, speaker: str) -> bool:
        """Whether a speaker is the assistant side (assistant, a bot, a tool call)."""
        return speaker in ("assistant", "tool") or any(speaker == b[0] for b in self.bots)


def parse_tz(text: str) -> timezone:
    """'+01:00' or '-05:00' as a fixed offset."""
    sign = -1 if text.startswith("-") else 1
    hours, minutes = text.lstrip("+-").split(":")
    return timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))


def typing_delay(speaker: str, text: str) -> timedelta:
    """How long after the previous message this one plausibly arrives."""
    if speaker in ("assistant", "tool", "result"):
        return timedelta(seconds=4 + min(len(text) // 35, 40))
    return timedelta(seconds=20 + min(len(text) // 4, 280))


def read_script(path: Path) -> Script:
    """Parse a chats file; ValueError with the line number on anything malformed."""
    person = path.parent.name
    lines = path.read_text(encoding="utf-8").splitlines()
    script = Script(person, "", UTC)
    body_start = _read_header(script, lines)
    _read_body(script, lines, body_start)
    if not script.format or not script.chats:
        raise ValueError(f"{path}: no format or no conversations")
    return script


def _read_header(script: Script, lines: list[str]) -> int:
    for number, line in enumerate(lines):
        if line.startswith("==="):
            return number
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        key, _, value = text.partition(":")
        value = value.strip()
        if key == "format":
            script.format = value
        elif key == "timezone":
            script.tz = parse_tz(value)
        elif key == "user":
            handle, uid, real = value.split(" ", 2)
            script.users.append((handle, uid, real))
        elif key == "bot":
            handle, uid = value.split()
            script.bots.append((handle, uid))
        else:
            raise ValueError(f"line {number + 1}: unknown header {key!r}")
    return len(lines)


def _read_body(script: Script, lines: list[str], start: int) -> None:
    chat: Chat | None = None
    speaker, tool, at = "", "", datetime.min
    text: list[str] = []

    def flush() -> None:
        if chat is not None and speaker:
            chat.messages.append(Message(speaker, "\n".join(text).strip(), at, tool))

    for number, line in enumerate(lines[start:], start + 1):
        conv, msg = _CONV.match(line), _MSG.match(line)
        if conv:
            flush()
            started = datetime.fromisoformat(conv[1]).replace(tzinfo=script.tz)
            chat, speaker, text = Chat(started, conv[2].strip()), "", []
            script.chats.append(chat)
        elif msg:
            if chat is None:
                raise ValueError(f"line {number}: a message before any conversation")
            flush()
            last = chat.messages[-1].at if chat.messages else chat.started
            speaker, tool, text = msg[1], msg[2] or "", []
            at = _explicit_time(chat, msg[3], msg[4], script.tz) or last
        elif chat is not None and speaker:
            if not text and not line.strip():
                continue
            text.append(line)
        elif line.strip():
            raise ValueError(f"line {number}: text outside a message")
    flush()
    _space_out(script)


def _explicit_time(chat: Chat, day: str | None, hhmm: str | None, tz: timezone) -> datetime | None:
    if not hhmm:
        return None
    date = day.strip() if day else chat.started.date().isoformat()
    return datetime.fromisoformat(f"{date} {hhmm}").replace(tzinfo=tz)


def _space_out(script: Script) -> None:
    """Give every message without an explicit time its typing delay after the one before."""
    for chat in script.chats:
        spaced: list[Message] = []
        previous = chat.started
        for i, m in enumerate(chat.messages):
            at = m.at
            if i == 0:
                at = chat.started if at <= chat.started else at
            elif at <= previous:
                at = previous + typing_delay(m.speaker, m.text)
            spaced.append(Message(m.speaker, m.text, at, m.tool))
            previous = at
        chat.messages = spaced
