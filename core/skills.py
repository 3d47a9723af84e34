"""Procedural memory: action sequences that conversations repeat, proposed as skills.

Each conversation's actions (its tool calls and shell commands, in order: `run git push`,
`call web_search`) are recorded at its end. A sequence of `[skills] min_steps` to `max_steps`
actions found in `min_conversations` different conversations is proposed as a skill in the
OpenClaw declarative format (name, triggers, preconditions, steps). The owner accepts (maybe
edited), or rejects it; a rejected pattern is never proposed again. `context` names an accepted
skill whose trigger the message contains. Nothing here runs a skill: tiermem remembers and
suggests.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.core import metadata
from tiermem.core.distill.cues import GREETING_WORDS, SKILL_FILLER
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.terms import STOPWORDS, TERM
from tiermem.core.transcript import Transcript

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

STATUSES = ("proposed", "accepted", "rejected")
MAX_ACTIONS = 500
"""Actions kept per conversation."""
RECENT_CONVERSATIONS = 500
"""Repeats are looked for among this many most recent conversations."""


@dataclass(frozen=True)
class Skill:
    name: str
    status: str
    spec: dict[str, Any]
    pattern: tuple[str, ...]
    conversations: int
    created_at: float
    updated_at: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "conversations": self.conversations,
            "pattern": list(self.pattern),
            "skill": self.spec,
        }


def actions_of(transcript: Transcript) -> list[str]:
    """A conversation's actions: its tool calls, or else the shell commands its assistant
    messages show; each reduced to what repeats (a command's program and subcommand)."""
    raw = list(transcript.actions)
    if not raw:
        for message in transcript.messages:
            if message.role == "assistant":
                raw += ["run " + c for c in metadata.find_commands(message.text)]
    return [_normal(a) for a in raw][:MAX_ACTIONS]


def _normal(action: str) -> str:
    verb, _, rest = action.partition(" ")
    if verb != "run":
        return action
    words = rest.split()
    keep = words[:1] + [w for w in words[1:2] if re.fullmatch(r"[a-z][a-z0-9-]*", w)]
    return "run " + " ".join(keep)


def observe(mem: Memory, source: str, transcript: Transcript) -> list[Skill]:
    """Record a conversation's actions and propose the skills they complete (new proposals)."""
    actions = actions_of(transcript)
    if len(actions) < mem.cfg.skills.min_steps:
        return []
    words = _words(" ".join(m.text for m in transcript.messages if m.role in ("user", "")))
    with mem.db.transaction():
        mem.db.execute(
            "INSERT INTO action_sequences (agent_id, source, actions, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent_id, source) DO UPDATE SET actions = excluded.actions",
            (mem.agent_id, source, json.dumps({"actions": actions, "words": words}), mem.now()),
        )
        return propose(mem)


def _words(text: str) -> list[str]:
    """The words of the user's messages a trigger may use: no stopwords, politeness, greetings,
    time words or request filler ("please", "thanks", "today", "can you")."""
    counts = Counter(w for w in (t.casefold() for t in TERM.findall(text)) if _trigger_word(w))
    return [w for w, _ in counts.most_common(50)]


def _trigger_word(word: str) -> bool:
    return (
        len(word) > 2
        and word not in STOPWORDS
        and word not in SKILL_FILLER
        and word not in GREETING_WORDS
    )


def propose(mem: Memory) -> list[Skill]:
    """Propose every repeated sequence not yet known (inside the caller's transaction)."""
    cfg = mem.cfg.skills
    rows = mem.db.query(
        "SELECT actions FROM action_sequences WHERE agent_id = ? ORDER BY at DESC, source LIMIT ?",
        (mem.agent_id, RECENT_CONVERSATIONS),
    )
    seen = [json.loads(str(r[0])) for r in rows]
    known = {tuple(json.loads(str(r[0]))) for r in _rows(mem, "pattern")}
    found: list[Skill] = []
    for pattern, holders in _repeated(seen, cfg.min_steps, cfg.max_steps, cfg.min_conversations):
        if pattern in known or any(_contains(k, pattern) for k in known):
            continue
        spec = _spec(mem, pattern, [seen[i]["words"] for i in holders])
        found.append(_insert(mem, spec, pattern, len(holders)))
        known.add(pattern)
    return found


def _repeated(
    seen: list[dict[str, Any]], low: int, high: int, need: int
) -> list[tuple[tuple[str, ...], list[int]]]:
    """Contiguous sequences (longest first) held by at least `need` conversations, with them."""
    holders: dict[tuple[str, ...], set[int]] = {}
    for i, item in enumerate(seen):
        actions = item["actions"]
        for size in range(low, high + 1):
            for start in range(len(actions) - size + 1):
                gram = tuple(actions[start : start + size])
                if len(set(gram)) > 1:
                    holders.setdefault(gram, set()).add(i)
    out = [(g, sorted(h)) for g, h in holders.items() if len(h) >= need]
    out.sort(key=lambda gh: (-len(gh[0]), -len(gh[1]), gh[0]))
    return out


def _contains(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
    n = len(shorter)
    return any(longer[i : i + n] == shorter for i in range(len(longer) - n + 1))


def _spec(mem: Memory, pattern: tuple[str, ...], words: list[list[str]]) -> dict[str, Any]:
    """The OpenClaw declarative skill for a pattern."""
    steps: list[dict[str, Any]] = []
    commands: list[str] = []
    tools: list[str] = []
    for action in pattern:
        verb, _, rest = action.partition(" ")
        if verb == "run":
            steps.append({"action": "run_command", "command": rest})
            commands.append(rest.split()[0])
        else:
            steps.append({"action": "call_tool", "tool": rest, "params": {}})
            tools.append(rest)
    common = Counter(w for ws in words for w in set(ws) if _trigger_word(w))
    triggers = [w for w, n in common.most_common(3) if n >= 2]
    base = "-".join(dict.fromkeys(_slug(a.partition(" ")[2]) for a in pattern))[:48].strip("-")
    return {
        "name": _free_name(mem, base or "skill"),
        "description": "Repeated in past conversations: " + ", then ".join(pattern),
        "triggers": triggers or [" ".join(pattern[0].split()[1:])],
        "preconditions": {
            "commands_available": sorted(set(commands)),
            "tools_available": sorted(set(tools)),
        },
        "steps": steps,
    }


def _slug(text: str) -> str:
    return "-".join(w.casefold() for w in TERM.findall(text))[:24]


def _free_name(mem: Memory, base: str) -> str:
    taken = {str(r[0]) for r in _rows(mem, "name")}
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def _rows(mem: Memory, column: str) -> list[Any]:
    return mem.db.query(f"SELECT {column} FROM skills WHERE agent_id = ?", (mem.agent_id,))


def _insert(mem: Memory, spec: dict[str, Any], pattern: tuple[str, ...], count: int) -> Skill:
    now = mem.now()
    mem.db.execute(
        "INSERT INTO skills (agent_id, name, status, spec, pattern, conversations, created_at, "
        "updated_at) VALUES (?, ?, 'proposed', ?, ?, ?, ?, ?)",
        (mem.agent_id, spec["name"], json.dumps(spec), json.dumps(pattern), count, now, now),
    )
    return get(mem, spec["name"])


def listing(mem: Memory, status: str | None = None) -> list[Skill]:
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"unknown status {status!r}: use {', '.join(STATUSES)}")
    rows = mem.db.query(
        "SELECT name, status, spec, pattern, conversations, created_at, updated_at FROM skills "
        "WHERE agent_id = ? AND (? IS NULL OR status = ?) ORDER BY created_at, name",
        (mem.agent_id, status, status),
    )
    return [_skill(r) for r in rows]


def _skill(r: Sequence[Any]) -> Skill:
    return Skill(
        name=str(r[0]),
        status=str(r[1]),
        spec=json.loads(str(r[2])),
        pattern=tuple(json.loads(str(r[3]))),
        conversations=int(r[4]),
        created_at=float(r[5]),
        updated_at=float(r[6]),
    )


def get(mem: Memory, name: str) -> Skill:
    found = [s for s in listing(mem) if s.name == name]
    if not found:
        raise NotFound(f"no skill {name!r} (tiermem skills list)")
    return found[0]


def decide(mem: Memory, name: str, status: str, spec: object = None) -> Skill:
    """Accept (with an edited spec, if given) or reject a skill."""
    if status not in ("accepted", "rejected"):
        raise InvalidInput("a skill is accepted or rejected")
    with mem.db.transaction():
        skill = get(mem, name)
        new = skill.spec if spec is None else check_spec(spec, name)
        mem.db.execute(
            "UPDATE skills SET status = ?, spec = ?, updated_at = ? WHERE agent_id = ? AND name = ?",
            (status, json.dumps(new), mem.now(), mem.agent_id, name),
        )
    return get(mem, name)


def check_spec(spec: object, name: str) -> dict[str, Any]:
    """An owner's edit of a skill: the declarative shape, under the skill's own name."""
    if not isinstance(spec, dict):
        raise InvalidInput("a skill is a JSON object")
    if spec.get("name") != name:
        raise InvalidInput(f"the skill's name must stay {name!r}")
    triggers = spec.get("triggers")
    if (
        not isinstance(triggers, list)
        or not triggers
        or not all(isinstance(t, str) and t.strip() for t in triggers)
    ):
        raise InvalidInput("triggers must be a non-empty list of phrases")
    if not isinstance(spec.get("preconditions", {}), dict):
        raise InvalidInput("preconditions must be an object")
    steps = spec.get("steps")
    if (
        not isinstance(steps, list)
        or not steps
        or not all(isinstance(s, dict) and isinstance(s.get("action"), str) for s in steps)
    ):
        raise InvalidInput("steps must be a non-empty list of objects with an action")
    return spec


def matching(mem: Memory, message: str) -> list[Skill]:
    """Accepted skills one of whose triggers the message contains (all of a trigger's words)."""
    words = {w.casefold() for w in TERM.findall(message)}
    out = []
    for skill in listing(mem, "accepted"):
        for trigger in skill.spec.get("triggers", []):
            need = {w.casefold() for w in TERM.findall(str(trigger))}
            need = {w for w in need if _trigger_word(w)} or need - SKILL_FILLER
            if need and need <= words:
                out.append(skill)
                break
    return out


def context_lines(mem: Memory, message: str | None) -> str:
    """The block that names matching accepted skills ('' when none)."""
    found = matching(mem, message) if message else []
    if not found:
        return ""
    lines = ["## Skills that match", ""]
    for skill in found:
        steps = "; ".join(
            str(s.get("command") or s.get("tool") or s.get("action")) for s in skill.spec["steps"]
        )
        lines.append(f"- {skill.name}: {steps} (`tiermem skills show {skill.name}`)")
    return "\n".join(lines) + "\n"
