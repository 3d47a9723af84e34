"""`tiermem skills`: skills proposed from repeated action sequences, and the owner's verdict."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tiermem.core import skills as skillsmod
from tiermem.core.errors import InvalidInput, StorageError
from tiermem.core.skills import Skill
from tiermem.tui.cli.options import Options, emit, pass_options


@click.group(name="skills")
def skills() -> None:
    """Skills noticed in repeated commands and tool calls: list, show, accept, reject, export."""


def _line(skill: Skill) -> str:
    steps = " → ".join(skill.pattern)
    return f"{skill.name}  [{skill.status}]  seen in {skill.conversations} conversations: {steps}"


@skills.command(name="list")
@click.option("--status", type=click.Choice(list(skillsmod.STATUSES)), help="Only these.")
@pass_options
def list_(opts: Options, status: str | None) -> None:
    """List the skills (proposed, accepted, rejected)."""
    with opts.open() as mem:
        found = skillsmod.listing(mem, status)
    emit(
        opts,
        {"skills": [s.as_dict() for s in found]},
        "\n".join(_line(s) for s in found) or "no skills yet",
    )


@skills.command(name="show")
@click.argument("name")
@pass_options
def show(opts: Options, name: str) -> None:
    """Print a skill in the OpenClaw declarative format."""
    with opts.open() as mem:
        skill = skillsmod.get(mem, name)
    emit(opts, skill.as_dict(), _line(skill) + "\n" + json.dumps(skill.spec, indent=2))


@skills.command(name="accept")
@click.argument("name")
@click.option(
    "--file",
    "edited",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Accept this edited version (a skill JSON file) instead.",
)
@pass_options
def accept(opts: Options, name: str, edited: Path | None) -> None:
    """Accept a proposed skill (optionally edited); `context` then names it when a message
    contains one of its triggers. Nothing runs it."""
    spec = _read(edited) if edited is not None else None
    with opts.open() as mem:
        skill = skillsmod.decide(mem, name, "accepted", spec)
    emit(opts, skill.as_dict(), f"accepted: {skill.name}")


@skills.command(name="reject")
@click.argument("name")
@pass_options
def reject(opts: Options, name: str) -> None:
    """Reject a skill: it is never proposed again."""
    with opts.open() as mem:
        skill = skillsmod.decide(mem, name, "rejected")
    emit(opts, skill.as_dict(), f"rejected: {skill.name}")


@skills.command(name="export")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@pass_options
def export(opts: Options, folder: Path) -> None:
    """Write the accepted skills as OpenClaw skill files (FOLDER/NAME.json)."""
    with opts.open() as mem:
        found = skillsmod.listing(mem, "accepted")
    written = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for skill in found:
            path = folder / f"{skill.name}.json"
            path.write_text(json.dumps(skill.spec, indent=2) + "\n", encoding="utf-8")
            written.append(str(path))
    except OSError as exc:
        raise StorageError(f"cannot write to {folder}: {exc.strerror}") from None
    emit(opts, {"written": written}, "\n".join(written) or "no accepted skills")


def _read(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
