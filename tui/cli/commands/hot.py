"""`tiermem hot`: show or edit hot memory, the part that is always in context."""

from __future__ import annotations

import json
from typing import Any

import click
import msgspec

from tiermem.core import provenance
from tiermem.core.errors import InvalidInput
from tiermem.core.memory_md import MemoryMdReport
from tiermem.core.tokens import count_tokens
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.reports import render_memory_md


@click.command()
@click.option(
    "--update",
    nargs=2,
    metavar="KEY JSON",
    help="Merge a JSON object into identity or owner_profile (null removes a key).",
)
@click.option("--add-lesson", metavar="TEXT", help="Add a critical lesson.")
@click.option(
    "--importance", type=float, default=0.7, show_default=True, help="Importance of the lesson."
)
@click.option("--category", default="general", show_default=True, help="Lesson category.")
@click.option("--add-event", metavar="TEXT", help="Add a recent event.")
@click.option("--add-task", metavar="TEXT", help="Add a pending task.")
@click.option("--complete-task", metavar="ID|TEXT", help="Mark a task done (it becomes an event).")
@click.option("--add-project", metavar="NAME", help="Add or update a project.")
@click.option("--description", default="", help="Project description.")
@click.option("--status", default="", help="Project status.")
@click.option("--remove", metavar="ID|TEXT", help="Remove a lesson, event, task or project.")
@pass_options
def hot(
    opts: Options,
    update: tuple[str, str] | None,
    add_lesson: str | None,
    importance: float,
    category: str,
    add_event: str | None,
    add_task: str | None,
    complete_task: str | None,
    add_project: str | None,
    description: str,
    status: str,
    remove: str | None,
) -> None:
    """Show or edit hot memory (always in context; rendered as MEMORY.md)."""
    actions = [
        a
        for a in (update, add_lesson, add_event, add_task, complete_task, add_project, remove)
        if a is not None
    ]
    if len(actions) > 1:
        raise InvalidInput("give one hot edit at a time")
    with opts.open(create=bool(actions)) as mem:
        if actions:
            mem.require_memory()
        path = mem.home.memory_md(mem.agent_id)
        pruned: list[str] = []
        if update is not None:
            pruned = mem.update_hot(update[0], _json_object(update[1]))
        elif add_lesson is not None:
            pruned = mem.add_lesson(add_lesson, importance, category)[1]
        elif add_event is not None:
            pruned = mem.add_event(add_event)[1]
        elif add_task is not None:
            pruned = mem.add_task(add_task)[1]
        elif complete_task is not None:
            pruned = mem.complete_task(complete_task)[1]
        elif add_project is not None:
            pruned = mem.add_project(add_project, description, status)[1]
        elif remove is not None:
            mem.remove_hot_item(remove)
        read_back = mem.last_memory_md or (  # hand edits of MEMORY.md (not in a read-only home)
            MemoryMdReport(path) if mem.read_only else mem.read_back_memory_md()
        )
        state = mem.hot()
        markdown = mem.memory_md()
        size = mem.hot_size_bytes()
        limit = mem.cfg.hot.max_bytes
        origins = provenance.of_lessons(mem, state)
    payload = {
        "hot": msgspec.to_builtins(state),
        "bytes": size,
        "limit_bytes": limit,
        "pruned": pruned,
        "memory_md": str(path),
        "hand_edits": read_back.as_dict() if read_back.edited else None,
        "provenance": origins,
    }
    if opts.json:  # the tokenizer takes longer to load than the rest of this command
        payload["tokens"] = count_tokens(markdown)
    text = markdown + f"\n{size}/{limit} bytes · {path}"
    texts = {x.id: x.text for x in state.critical_lessons}
    for lesson_id, origin in origins.items():
        text += (
            f"\n↑ {texts[lesson_id][:60]} ← memory {origin['source_id']}, "
            f"{origin['promoted_at']} ({origin['why']})"
        )
    if pruned:
        text += "\nmoved to warm: " + "; ".join(pruned)
    if read_back.edited:
        text += "\n" + "\n".join(render_memory_md(read_back))
    emit(opts, payload, text)


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--update value is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InvalidInput("--update value is not valid JSON (nested too deeply)") from None
    if not isinstance(value, dict):
        raise InvalidInput("--update value must be a JSON object")
    return value
