"""Chat histories, each conversation to be run through conversation-end.

- **claude-code**: `~/.claude/projects/<project>/<session>.jsonl` (or one such file); lines of
  `{"type": "user"|"assistant", "sessionId", "timestamp", "message": {"role", "content"}}`,
  content a string or blocks (`text` kept; `tool_use`, `tool_result`, `thinking` skipped).
- **chatgpt**: the data export's `conversations.json` (or its folder): a list of
  `{"id", "title", "create_time", "mapping": {node: {"message": {"author": {"role"},
  "content": {"parts": [...]}}, "parent", "children"}}, "current_node"}`; the branch that ends
  at `current_node` is the conversation as last seen.
- **claude-ai**: the claude.ai export's `conversations.json`: a list of `{"uuid", "name",
  "created_at", "chat_messages": [{"sender": "human"|"assistant", "text", "content"}]}`.
- **slack**: a workspace export folder (`users.json`, `channels.json`, `CHANNEL/YYYY-MM-DD.json`
  lists of `{"type": "message", "user", "text", "ts"}`); one channel-day is one conversation,
  people's messages as the user's side (the owner's, who wrote the most, as they are; anyone
  else's as "Dana Kim said: …"), bots' as the assistant's, join/leave notices skipped.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tiermem.core.errors import InvalidInput
from tiermem.core.importers.base import (
    Conversation,
    Plan,
    need_exists,
    need_folder,
    read_file_text,
    read_json_file,
    timestamp,
)
from tiermem.core.transcript import Message

_SLACK_SKIPPED = {"channel_join", "channel_leave", "channel_topic", "channel_purpose", "bot_add"}


def _text_of(content: Any) -> str:
    """The text of a message content: a string, or the `text` blocks of a block list."""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        return "\n".join(p for p in parts if p.strip()).strip()
    return ""


def _finish(plan: Plan, conv: Conversation) -> None:
    if conv.messages:
        plan.conversations.append(conv)
    else:
        plan.skip(f"conversation {conv.title or conv.id}: no messages")


# -- Claude Code --------------------------------------------------------------------------------


def plan_claude_code(path: Path) -> Plan:
    """Every session transcript (*.jsonl) under a folder, or one transcript file."""
    need_exists(path)
    files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise InvalidInput(f"{path}: no Claude Code session files (*.jsonl)")
    plan = Plan("claude-code")
    for file in files:
        try:
            _claude_code_file(plan, file)
        except InvalidInput as exc:
            plan.skip(str(exc))
    return plan


def _claude_code_file(plan: Plan, file: Path) -> None:
    messages: list[Message] = []
    session, started = file.stem, None
    for number, line in enumerate(read_file_text(file).splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            plan.skip(f"{file.name} line {number}: not JSON")
            continue
        if not isinstance(entry, dict) or entry.get("type") not in ("user", "assistant"):
            continue
        if entry.get("isMeta") or entry.get("isSidechain"):
            continue
        session = str(entry.get("sessionId") or session)
        started = started or timestamp(entry.get("timestamp"))
        message = entry.get("message") or {}
        text = _text_of(message.get("content")) if isinstance(message, dict) else ""
        if text and not text.startswith(("<command-", "<local-command-", "Caveat:")):
            messages.append(Message(str(entry["type"]), text))
    _finish(plan, Conversation(session, file.stem, started, tuple(messages)))


# -- ChatGPT ------------------------------------------------------------------------------------


def _export_list(path: Path) -> list[Any]:
    need_exists(path)
    file = path / "conversations.json" if path.is_dir() else path
    data = read_json_file(file)
    if not isinstance(data, list):
        raise InvalidInput(f"{file}: expected a list of conversations")
    return data


def plan_chatgpt(path: Path) -> Plan:
    """The conversations of a ChatGPT data export (conversations.json)."""
    plan = Plan("chatgpt")
    for i, raw in enumerate(_export_list(path)):
        if not isinstance(raw, dict) or not isinstance(raw.get("mapping"), dict):
            plan.skip(f"conversation {i}: not a ChatGPT conversation")
            continue
        conv_id = str(raw.get("conversation_id") or raw.get("id") or i)
        messages = _chatgpt_branch(raw["mapping"], raw.get("current_node"))
        title = str(raw.get("title") or "")
        started = timestamp(raw.get("create_time"))
        _finish(plan, Conversation(conv_id, title, started, tuple(messages)))
    return plan


def _chatgpt_branch(mapping: dict[str, Any], current: Any) -> list[Message]:
    """The messages from the root to `current_node` (the last leaf when it is missing)."""
    if current not in mapping:
        leaves = [k for k, node in mapping.items() if not (node or {}).get("children")]
        current = leaves[-1] if leaves else None
    chain: list[Message] = []
    seen: set[str] = set()
    while current in mapping and current not in seen:
        seen.add(current)
        node = mapping[current] or {}
        message = node.get("message") or {}
        role = str((message.get("author") or {}).get("role") or "")
        content = message.get("content") or {}
        parts = content.get("parts") if isinstance(content, dict) else None
        text = "\n".join(p for p in parts or [] if isinstance(p, str)).strip()
        if role in ("user", "assistant") and text:
            chain.append(Message(role, text))
        current = node.get("parent")
    return chain[::-1]


# -- claude.ai ----------------------------------------------------------------------------------


def plan_claude_ai(path: Path) -> Plan:
    """The conversations of a claude.ai data export (conversations.json)."""
    plan = Plan("claude-ai")
    for i, raw in enumerate(_export_list(path)):
        if not isinstance(raw, dict) or not isinstance(raw.get("chat_messages"), list):
            plan.skip(f"conversation {i}: not a claude.ai conversation")
            continue
        messages = []
        for message in raw["chat_messages"]:
            if not isinstance(message, dict):
                continue
            role = {"human": "user", "assistant": "assistant"}.get(str(message.get("sender")))
            text = str(message.get("text") or "").strip() or _text_of(message.get("content"))
            if role and text:
                messages.append(Message(role, text))
        conv_id = str(raw.get("uuid") or i)
        title = str(raw.get("name") or "")
        started = timestamp(raw.get("created_at"))
        _finish(plan, Conversation(conv_id, title, started, tuple(messages)))
    return plan


# -- Slack --------------------------------------------------------------------------------------


def plan_slack(path: Path) -> Plan:
    """Every channel-day of a Slack workspace export folder."""
    folder = need_folder(path)
    plan = Plan("slack")
    days = sorted(p for p in folder.glob("*/*.json") if not p.parent.name.startswith("."))
    if not days:
        raise InvalidInput(f"{path}: no Slack channel folders (CHANNEL/YYYY-MM-DD.json)")
    names = _slack_names(folder / "users.json", plan)
    loaded: list[tuple[Path, list[Any]]] = []
    for day in days:
        try:
            data = read_json_file(day)
        except InvalidInput as exc:
            plan.skip(str(exc))
            continue
        if not isinstance(data, list):
            plan.skip(f"{day.parent.name}/{day.name}: not a list of messages")
            continue
        loaded.append((day, data))
    owner = _slack_owner(data for _, data in loaded)
    for day, data in loaded:
        messages, started = _slack_messages(data, names, owner)
        channel = day.parent.name
        conv = Conversation(
            f"{channel}/{day.stem}", f"#{channel} {day.stem}", started, tuple(messages)
        )
        _finish(plan, conv)
    return plan


_SLACK_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|([^>]*))?>")


def _slack_names(users: Path, plan: Plan) -> dict[str, str]:
    """User id → the name people know them by (`users.json`: real name, display name, handle)."""
    if not users.is_file():
        return {}
    try:
        data = read_json_file(users)
    except InvalidInput as exc:
        plan.skip(f"{exc} (mentions stay as user ids)")
        return {}
    names = {}
    for user in data if isinstance(data, list) else []:
        if not isinstance(user, dict) or not isinstance(user.get("id"), str):
            continue
        profile = user.get("profile")
        profile = profile if isinstance(profile, dict) else {}
        for name in (
            user.get("real_name"),
            profile.get("real_name"),
            profile.get("display_name"),
            user.get("name"),
        ):
            if isinstance(name, str) and name.strip():
                names[user["id"]] = name.strip()
                break
    return names


def _resolve_mentions(text: str, names: dict[str, str]) -> str:
    """`<@U01>` (or `<@U01|ann>`) as `@Ann`, the way Slack shows it."""

    def name(match: re.Match[str]) -> str:
        return "@" + (names.get(match.group(1)) or match.group(2) or match.group(1))

    return _SLACK_MENTION.sub(name, text)


def _slack_owner(days: Iterable[list[Any]]) -> str | None:
    """The person whose export it is: who wrote the most messages (None for a bot-only one)."""
    said = Counter(
        raw["user"]
        for data in days
        for raw in data
        if isinstance(raw, dict) and isinstance(raw.get("user"), str) and not _bot(raw)
    )
    return said.most_common(1)[0][0] if said else None


def _bot(raw: dict[str, Any]) -> bool:
    return raw.get("subtype") == "bot_message" or "bot_id" in raw


def _slack_messages(
    data: list[Any], names: dict[str, str], owner: str | None
) -> tuple[list[Message], float | None]:
    """A channel-day's messages; what someone other than the owner wrote is said to be theirs
    ("Dana said: moving to austin"), so it is never stored as the owner's own fact."""
    messages = []
    started = None
    for raw in data:
        if not isinstance(raw, dict) or raw.get("type") != "message":
            continue
        if raw.get("subtype") in _SLACK_SKIPPED:
            continue
        text = _resolve_mentions(str(raw.get("text") or "").strip(), names)
        if not text:
            continue
        started = started or timestamp(raw.get("ts"))
        bot = _bot(raw)
        who = raw.get("user")
        if not bot and owner is not None and isinstance(who, str) and who != owner:
            text = f"{names.get(who, who)} said: {text}"
        messages.append(Message("assistant" if bot else "user", text))
    return messages, started
