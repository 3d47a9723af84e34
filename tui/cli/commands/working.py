"""`tiermem working`: the agent's working memory of one session (goal, plan, facts, …)."""

from __future__ import annotations

import json
from typing import Any

import click

from tiermem.core import working as workingmod
from tiermem.tui.cli.options import Options, emit, pass_options

session_required = click.option(
    "--session", required=True, help="The session whose working memory this is."
)


@click.group(name="working")
def working() -> None:
    """Show, set or clear the working memory of a session (a JSON object, size-limited)."""


def _payload(mem: Any, session: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "session": session,
        "working_memory": data,
        "tokens": workingmod.tokens(data),
        "limit_tokens": mem.cfg.working.max_tokens,
    }


def _text(payload: dict[str, Any]) -> str:
    data = payload["working_memory"]
    body = json.dumps(data, indent=2, ensure_ascii=False) if data else "(empty)"
    return f"{body}\n{payload['tokens']}/{payload['limit_tokens']} tokens"


@working.command(name="show")
@session_required
@pass_options
def show(opts: Options, session: str) -> None:
    """Print the session's working memory."""
    with opts.open() as mem:
        payload = _payload(mem, session, workingmod.show(mem, session))
    emit(opts, payload, _text(payload))


@working.command(name="set")
@click.argument("data", metavar="JSON")
@session_required
@click.option("--merge", is_flag=True, help="Merge into what is there (null removes a key).")
@pass_options
def set_(opts: Options, data: str, session: str, merge: bool) -> None:
    """Replace (or with --merge, patch) the working memory with a JSON object; over the token
    limit it is refused and nothing changes."""
    value = workingmod.parse(data)
    with opts.open(create=True) as mem:
        if merge:
            saved = workingmod.patch(mem, session, value)
        else:
            saved = workingmod.replace(mem, session, value)
        payload = _payload(mem, session, saved)
    emit(opts, payload, _text(payload))


@working.command(name="clear")
@session_required
@pass_options
def clear(opts: Options, session: str) -> None:
    """Empty the session's working memory (conversation-end does it too)."""
    with opts.open() as mem:
        old = workingmod.clear(mem, session)
    emit(opts, {"session": session, "cleared": old}, "cleared" if old else "was already empty")
