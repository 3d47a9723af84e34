"""Working memory: the agent's scratch state for the task of one session.

A JSON object per session id (the original design's shape: `goal`, `plan`, `facts`,
`recent_observations`, `active_skill`, and any other key the agent needs), at most
`[working] max_tokens` tokens of compact JSON. The agent reads and updates it during a
conversation; `context` shows it; the conversation's end folds it into its report and clears
it. A change that would go over the limit is refused and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tiermem.core import hygiene, skills
from tiermem.core.errors import InvalidInput, LimitExceeded
from tiermem.core.tokens import count_tokens

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

HEADING = "## Working memory"
KNOWN_KEYS = ("goal", "plan", "facts", "recent_observations", "active_skill")
"""The keys the original design names (others are allowed)."""


def encode(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def tokens(data: Mapping[str, Any]) -> int:
    """What the working memory costs: the tokens of its compact JSON."""
    return count_tokens(encode(data)) if data else 0


def show(mem: Memory, session: str) -> dict[str, Any]:
    """The session's working memory ({} when it has none)."""
    raw = mem.db.scalar(
        "SELECT data FROM working_memory WHERE agent_id = ? AND session_id = ?",
        (mem.agent_id, hygiene.check_session(session)),
    )
    value = json.loads(str(raw)) if raw is not None else {}
    return value if isinstance(value, dict) else {}


def replace(mem: Memory, session: str, data: object) -> dict[str, Any]:
    """Set the whole working memory of the session (refused over the limit)."""
    if not isinstance(data, dict):
        raise InvalidInput("working memory must be a JSON object")
    return _save(mem, hygiene.check_session(session), data)


def patch(mem: Memory, session: str, changes: object) -> dict[str, Any]:
    """Merge `changes` into the working memory (JSON merge patch: a key set to null is
    removed, an object merges into an object)."""
    if not isinstance(changes, dict):
        raise InvalidInput("a working-memory patch must be a JSON object")
    session = hygiene.check_session(session)
    with mem.db.transaction():
        return _save(mem, session, _merge(show(mem, session), changes))


def clear(mem: Memory, session: str) -> dict[str, Any]:
    """Remove the session's working memory; returns what it held."""
    session = hygiene.check_session(session)
    with mem.db.transaction():
        old = show(mem, session)
        mem.db.execute(
            "DELETE FROM working_memory WHERE agent_id = ? AND session_id = ?",
            (mem.agent_id, session),
        )
    return old


def parse(text: str) -> object:
    """A JSON value given on the command line (one clear line when it is not JSON)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"not valid JSON: {exc.msg} (line {exc.lineno})") from None


def render(data: Mapping[str, Any]) -> str:
    """The working memory as a block of the prompt ('' when empty)."""
    if not data:
        return ""
    return f"{HEADING}\n\n```json\n{json.dumps(data, ensure_ascii=False, indent=1)}\n```\n"


def _merge(target: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(target)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _save(mem: Memory, session: str, data: dict[str, Any]) -> dict[str, Any]:
    mem.require_memory()
    limit = mem.cfg.working.max_tokens
    cost = tokens(data)
    if cost > limit:
        raise LimitExceeded(
            f"working memory would be {cost} tokens, over the limit of {limit}: nothing changed"
        )
    with mem.db.transaction():
        if not data:
            mem.db.execute(
                "DELETE FROM working_memory WHERE agent_id = ? AND session_id = ?",
                (mem.agent_id, session),
            )
        else:
            mem.db.execute(
                "INSERT INTO working_memory (agent_id, session_id, data, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (agent_id, session_id) DO UPDATE SET "
                "data = excluded.data, updated_at = excluded.updated_at",
                (mem.agent_id, session, encode(data), mem.now()),
            )
    return data


def task_sections(
    mem: Memory, query: str | None, session: str | None, room: int, notes: list[str]
) -> str:
    """The session's working memory and the accepted skills the message triggers, each only
    if it fits what the always-loaded part leaves of the budget."""
    text = ""
    parts = [
        ("working memory", render(show(mem, session)) if session else ""),
        ("matching skills", skills.context_lines(mem, query)),
    ]
    for name, part in parts:
        if not part:
            continue
        if count_tokens(text + "\n" + part) <= room:
            text += "\n" + part
        else:
            notes.append(f"{name} left out: over the token budget")
    return text
