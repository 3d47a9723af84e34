"""Reading what an agent hands over: a conversation transcript or a note, as checked text.

Two transcript shapes are understood:

- **plain text**: `User: …` / `Assistant: …` lines (also `Human`, `Agent`, `AI`, `Bot`, `Me`);
  lines without a speaker continue the previous message, or are notes;
- **JSONL**: one JSON object per line, either OpenClaw's session format
  (`{"type": "session", "id": …}` then `{"type": "message", "message": {"role", "content"}}`,
  content a string or blocks `{"type": "text"|"thinking"|"toolCall", …}`) or plain chat lines
  (`{"role": "user", "content": "…"}`). Tool results, thinking and system prompts are not
  conversation and are skipped; a tool call's shell command is kept as a command. A malformed
  line is a warning and is skipped, the rest is read. A line's `timestamp` (ISO 8601, or epoch
  seconds or milliseconds; on the line or in its message) dates the message, so the
  conversation is dated when it was held, not when it was handed over.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from tiermem.core.errors import InvalidInput

MAX_INPUT_BYTES = 256 * 1024 * 1024
MAX_WARNINGS = 20
_SPEAKER = re.compile(
    r"^\s*(?:\*\*|__)?(user|human|me|owner|assistant|agent|ai|bot|system)(?:\*\*|__)?\s*:\s?(.*)$",
    re.I,
)
_ROLES = {
    "user": "user",
    "human": "user",
    "me": "user",
    "owner": "user",
    "assistant": "assistant",
    "agent": "assistant",
    "ai": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "system": "system",
}
_SKIPPED_ROLES = {"system", "developer", "tool", "toolresult", "tool_result", "function"}


@dataclass(frozen=True)
class Message:
    role: str
    """user, assistant, or '' (a note without a speaker)."""
    text: str
    at: float | None = None
    """When it was said (epoch seconds), when the transcript says."""


@dataclass
class Transcript:
    messages: list[Message] = field(default_factory=list)
    format: str = "text"
    """text, jsonl or openclaw."""
    session_id: str | None = None
    tool_commands: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    """Every tool call in order: `run <command>` for a shell command, else `call <tool>`."""
    warnings: list[str] = field(default_factory=list)
    raw_bytes: int = 0
    opened_at: float | None = None
    """When the session began (OpenClaw's session line), if it says."""
    _dropped_warnings: int = 0

    @property
    def span(self) -> tuple[float, float] | None:
        """(first, last) moment the transcript dates, or None when it dates nothing."""
        moments = [m.at for m in self.messages if m.at is not None]
        if self.opened_at is not None:
            moments.append(self.opened_at)
        return (min(moments), max(moments)) if moments else None

    def warn(self, message: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message)
        else:
            self._dropped_warnings += 1

    def finish(self) -> None:
        if self._dropped_warnings:
            self.warnings.append(f"… and {self._dropped_warnings} more warnings like these")
            self._dropped_warnings = 0


def read_bytes(source: str | Path) -> tuple[str, bytes]:
    """The bytes of a file, or of standard input for `-`; (name, data)."""
    if str(source) == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InvalidInput("no input: give a FILE or pipe the text into standard input")
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        name = "<stdin>"
    else:
        path = Path(source)
        name = str(path)
        try:
            if path.is_dir():
                raise InvalidInput(f"{name}: is a folder, not a file")
            with path.open("rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            raise InvalidInput(f"{name}: cannot read ({exc.strerror})") from None
    if len(data) > MAX_INPUT_BYTES:
        raise InvalidInput(f"{name}: larger than {MAX_INPUT_BYTES // 2**20} MB; split it first")
    return name, data


def decode_text(name: str, data: bytes) -> str:
    """Checked text: not empty, not binary, valid UTF-8 (a BOM is dropped)."""
    if not data.strip():
        raise InvalidInput(f"{name}: is empty")
    if b"\x00" in data[:8192]:
        raise InvalidInput(f"{name}: is a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{name}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    if "\x00" in text:
        raise InvalidInput(f"{name}: contains NUL characters (binary?)")
    return text.removeprefix("\ufeff")


def read_text(source: str | Path) -> tuple[str, str]:
    name, data = read_bytes(source)
    return name, decode_text(name, data)


def parse(text: str) -> Transcript:
    """A transcript from text: JSONL when its first non-blank line is a JSON object."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    jsonl = first.lstrip().startswith("{")
    transcript = _parse_jsonl(text) if jsonl else _parse_plain(text)
    transcript.raw_bytes = len(text.encode())
    transcript.finish()
    return transcript


def _parse_plain(text: str) -> Transcript:
    transcript = Transcript(format="text")
    role = ""
    lines: list[str] = []

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body and role != "system":
            transcript.messages.append(Message(role, body))
        lines.clear()

    for line in text.splitlines():
        match = _SPEAKER.match(line)
        if match:
            flush()
            role = _ROLES[match.group(1).lower()]
            lines.append(match.group(2))
        else:
            lines.append(line)
    flush()
    return transcript


_decoder = msgspec.json.Decoder()


def _parse_jsonl(text: str) -> Transcript:
    transcript = Transcript(format="jsonl")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = _decoder.decode(line)
        except (msgspec.DecodeError, RecursionError):
            transcript.warn(f"line {number}: not valid JSON, skipped")
            continue
        if not isinstance(obj, dict):
            transcript.warn(f"line {number}: not a JSON object, skipped")
            continue
        kind = obj.get("type")
        if kind == "session":
            transcript.format = "openclaw"
            if isinstance(obj.get("id"), str) and obj["id"].strip():
                transcript.session_id = obj["id"].strip()
            transcript.opened_at = moment(obj.get("timestamp"))
            continue
        body = obj.get("message") if kind == "message" else obj
        if not isinstance(body, dict) or "role" not in body:
            if kind in (None, "message"):
                transcript.warn(f"line {number}: not a chat message, skipped")
            continue  # other OpenClaw entries: model_change, custom, ...
        if kind == "message":
            transcript.format = "openclaw"
        at = moment(obj.get("timestamp"))
        _add_message(transcript, body, number, moment(body.get("timestamp")) if at is None else at)
    return transcript


def moment(value: object) -> float | None:
    """A transcript's timestamp as epoch seconds: ISO 8601 (a zone-less one is UTC), or a number
    of seconds or milliseconds; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value) / 1000 if value > 1e11 else float(value)
        return seconds if 0 < seconds < 1e11 else None
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def _add_message(
    transcript: Transcript, body: dict[str, Any], number: int, at: float | None = None
) -> None:
    role = body.get("role")
    if not isinstance(role, str):
        transcript.warn(f"line {number}: message without a role, skipped")
        return
    role_key = role.strip().lower()
    content = body.get("content")
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict):
                if block.get("type") in ("text", "input_text", "output_text") and isinstance(
                    block.get("text"), str
                ):
                    texts.append(block["text"])
                elif block.get("type") in ("toolCall", "tool_use", "function_call"):
                    _tool_command(transcript, block)
    elif content is not None:
        transcript.warn(f"line {number}: message content is not text, skipped")
        return
    calls = body.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict):
            function = call.get("function")
            _tool_command(transcript, function if isinstance(function, dict) else call)
    if role_key in _SKIPPED_ROLES:
        return
    text = "\n".join(t for t in texts if t.strip()).strip()
    if text:
        transcript.messages.append(Message(_ROLES.get(role_key, role_key), text, at))


def _tool_command(transcript: Transcript, call: dict[str, Any]) -> None:
    """A tool call that runs a shell command (`{"command": "…"}`) leaves that command; every
    call is an action."""
    name = call.get("name")
    if isinstance(name, str) and name.strip() and len(name) <= 200:
        transcript.actions.append(f"call {name.strip()}")
    args = call.get("arguments", call.get("input"))
    if isinstance(args, str):
        try:
            args = _decoder.decode(args)
        except (msgspec.DecodeError, RecursionError):
            return
    if isinstance(args, dict):
        command = args.get("command", args.get("cmd"))
        if isinstance(command, list) and all(isinstance(c, str) for c in command):
            command = " ".join(command)
        if isinstance(command, str) and command.strip() and len(command) <= 2000:
            transcript.tool_commands.append(" ".join(command.split()))
            if transcript.actions and transcript.actions[-1].startswith("call "):
                transcript.actions.pop()  # a shell tool: the command says more than its name
            transcript.actions.append("run " + " ".join(command.split()))
