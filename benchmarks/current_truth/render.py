"""Turn each person's chats file into the export their chat tool writes (`data/<person>/export/`).

    .venv/bin/python -m benchmarks.current_truth.render [--check]

The exports are committed; run this after editing a chats file (`--check` says whether the
committed exports match their chats files, without writing). Every message carries its own time
in the format's own field (ChatGPT `create_time`, claude.ai `created_at`, Claude Code
`timestamp`, Slack `ts`), so an import dates each memory by its conversation.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.current_truth.script import Chat, Message, Script, read_script

DATA = Path(__file__).resolve().parent / "data"
_NS = uuid.UUID("5b3c1f0e-8a52-4c1d-9e7a-0c6f2d4b1a90")


def ident(*parts: object) -> str:
    """A stable UUID for one conversation or message, so a re-render changes nothing."""
    return str(uuid.uuid5(_NS, "/".join(str(p) for p in parts)))


def iso(at: datetime, digits: int = 3) -> str:
    """UTC ISO 8601 with a Z, as the Anthropic exports write it."""
    text = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text[: len(text) - 6 + digits] + "Z"


def dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# -- ChatGPT --------------------------------------------------------------------------------------


def chatgpt(script: Script, out: Path) -> None:
    """conversations.json, newest conversation first as the export lists them."""
    convs = [_chatgpt_conv(script, n, chat) for n, chat in enumerate(script.chats)]
    convs.sort(key=lambda c: -float(c["update_time"]))
    dump(out / "conversations.json", convs)


def _chatgpt_node(node_id: str, m: Message | None, role: str, parent: str | None) -> dict[str, Any]:
    message: dict[str, Any] | None = None
    if role:
        stamp = m.at.timestamp() if m else None
        message = {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": stamp,
            "update_time": None,
            "content": {"content_type": "text", "parts": [m.text if m else ""]},
            "status": "finished_successfully",
            "end_turn": role == "assistant" or None,
            "weight": 1.0 if m else 0.0,
            "metadata": {"is_visually_hidden_from_conversation": True} if not m else {},
            "recipient": "all",
        }
    return {"id": node_id, "message": message, "parent": parent, "children": []}


def _chatgpt_conv(script: Script, n: int, chat: Chat) -> dict[str, Any]:
    root, system = ident(script.person, n, "root"), ident(script.person, n, "system")
    mapping = {
        root: _chatgpt_node(root, None, "", None),
        system: _chatgpt_node(system, None, "system", root),
    }
    mapping[root]["children"].append(system)
    parent = system
    for i, m in enumerate(chat.messages):
        node = ident(script.person, n, i)
        mapping[node] = _chatgpt_node(node, m, m.speaker, parent)
        mapping[parent]["children"].append(node)
        if m.tool != "abandoned":  # a regenerated reply: a side branch, not the one kept
            parent = node
    return {
        "title": chat.title,
        "create_time": chat.started.timestamp(),
        "update_time": chat.messages[-1].at.timestamp(),
        "mapping": mapping,
        "moderation_results": [],
        "current_node": parent,
        "plugin_ids": None,
        "conversation_id": ident(script.person, n),
        "conversation_template_id": None,
        "is_archived": False,
        "default_model_slug": "gpt-4o",
        "id": ident(script.person, n),
    }


# -- claude.ai ------------------------------------------------------------------------------------


def claude_ai(script: Script, out: Path) -> None:
    """conversations.json and users.json of a claude.ai data export."""
    account = ident(script.person, "account")
    convs = [
        {
            "uuid": ident(script.person, n),
            "name": chat.title,
            "summary": "",
            "created_at": iso(chat.started, 6),
            "updated_at": iso(chat.messages[-1].at, 6),
            "account": {"uuid": account},
            "chat_messages": [
                _claude_ai_message(script, n, i, m) for i, m in enumerate(chat.messages)
            ],
        }
        for n, chat in enumerate(script.chats)
    ]
    dump(out / "conversations.json", convs)
    dump(out / "users.json", [{"uuid": account, "full_name": script.person.title()}])


def _claude_ai_message(script: Script, n: int, i: int, m: Message) -> dict[str, Any]:
    stamp = iso(m.at, 6)
    return {
        "uuid": ident(script.person, n, i),
        "text": m.text,
        "content": [
            {
                "start_timestamp": stamp,
                "stop_timestamp": stamp,
                "type": "text",
                "text": m.text,
                "citations": [],
            }
        ],
        "sender": "human" if m.speaker == "user" else "assistant",
        "created_at": stamp,
        "updated_at": stamp,
        "attachments": [],
        "files": [],
    }


# -- Claude Code ----------------------------------------------------------------------------------


def claude_code(script: Script, out: Path) -> None:
    """One session transcript per conversation, under the project's folder name."""
    for n, chat in enumerate(script.chats):
        session = ident(script.person, n)
        folder = out / chat.title.replace("/", "-").replace(".", "-")
        lines = _claude_code_lines(script, n, chat, session)
        folder.mkdir(parents=True, exist_ok=True)
        text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n"
        (folder / f"{session}.jsonl").write_text(text, encoding="utf-8")


def _claude_code_lines(script: Script, n: int, chat: Chat, session: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    parent: str | None = None
    last_tool = ""
    for i, m in enumerate(chat.messages):
        node = ident(script.person, n, i)
        kind = "user" if m.speaker in ("user", "result") else "assistant"
        content: Any
        if m.speaker == "tool":
            last_tool = ident(script.person, n, i, "tool")
            key = "command" if m.tool == "Bash" else "file_path"
            content = [
                {"type": "tool_use", "id": last_tool, "name": m.tool, "input": {key: m.text}}
            ]
        elif m.speaker == "result":
            content = [{"type": "tool_result", "tool_use_id": last_tool, "content": m.text}]
        elif m.speaker == "assistant":
            content = [{"type": "text", "text": m.text}]
        else:
            content = m.text
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            message = {"id": f"msg_{node[:8]}", "type": "message", "model": _MODEL, **message}
        lines.append(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": chat.title,
                "sessionId": session,
                "version": "2.0.14",
                "gitBranch": "main",
                "type": kind,
                "message": message,
                "uuid": node,
                "timestamp": iso(m.at),
            }
        )
        parent = node
    return lines


_MODEL = "claude-sonnet-4-5-20250929"


# -- Slack ----------------------------------------------------------------------------------------


def slack(script: Script, out: Path) -> None:
    """users.json, channels.json and one CHANNEL/YYYY-MM-DD.json per channel-day."""
    ids = {handle: uid for handle, uid, _ in script.users} | dict(script.bots)
    names = {handle: real for handle, _, real in script.users}
    days: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for chat in script.chats:
        channel = chat.title.lstrip("#")
        for m in chat.messages:
            day = m.at.astimezone(script.tz).date().isoformat()
            days[(channel, day)].append(_slack_message(m, ids, names, script))
    for (channel, day), messages in days.items():
        dump(out / channel / f"{day}.json", messages)
    users = [
        {"id": uid, "name": handle, "real_name": real, "is_bot": False, "tz_offset": 0}
        for handle, uid, real in script.users
    ]
    users += [{"id": f"U{uid}", "name": h, "is_bot": True} for h, uid in script.bots]
    dump(out / "users.json", users)
    created = int(script.chats[0].started.timestamp()) - 86400 * 200
    channels = sorted({c for c, _ in days})
    dump(
        out / "channels.json",
        [
            {"id": ident(script.person, c)[:9].upper(), "name": c, "created": created}
            for c in channels
        ],
    )


def _slack_message(
    m: Message, ids: dict[str, str], names: dict[str, str], script: Script
) -> dict[str, Any]:
    ts = f"{m.at.timestamp():.6f}"
    if script.is_assistant(m.speaker):
        return {
            "type": "message",
            "subtype": "bot_message",
            "text": m.text,
            "ts": ts,
            "bot_id": ids[m.speaker],
            "username": m.speaker,
        }
    return {
        "client_msg_id": ident(script.person, m.speaker, ts),
        "type": "message",
        "text": m.text,
        "user": ids[m.speaker],
        "ts": ts,
        "team": "T0FERNHL1",
        "user_profile": {"name": m.speaker, "real_name": names[m.speaker]},
    }


# -- all ------------------------------------------------------------------------------------------

RENDERERS = {"chatgpt": chatgpt, "claude-ai": claude_ai, "claude-code": claude_code, "slack": slack}


def people_with_chats() -> list[Path]:
    """Every person folder that has a chats file (the OpenClaw workspace is written by hand)."""
    return sorted(p.parent for p in DATA.glob("*/chats.txt"))


def render(person: Path, out: Path) -> Script:
    script = read_script(person / "chats.txt")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    RENDERERS[script.format](script, out)
    return script


def same_tree(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return files_a == files_b and all((a / f).read_bytes() == (b / f).read_bytes() for f in files_a)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.current_truth.render")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    stale = []
    for person in people_with_chats():
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                render(person, Path(tmp) / "export")
                if not same_tree(Path(tmp) / "export", person / "export"):
                    stale.append(person.name)
        else:
            script = render(person, person / "export")
            count = sum(len(c.messages) for c in script.chats)
            print(f"{person.name}: {script.format}, {len(script.chats)} chats, {count} messages")
    if stale:
        print(f"exports out of date: {', '.join(stale)} (run without --check)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
