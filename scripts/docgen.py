"""The generated parts of the documentation in docs/, so they cannot drift from the code:

- the configuration reference and the environment variables (docs/configuration.md), from the
  config model (`tiermem.core.config`: the msgspec structs' fields, types, constraints, defaults
  and the docstrings under each field) and the environment model (`tiermem.core.environment`);
- the exit codes (docs/cli.md), from the `TiermemError` subclasses (their `exit_code` and
  docstring) plus the CLI's own codes;
- the screenshots, copied from the TUI's SVG snapshot tests (`tests/tui/__snapshots__`).

Regenerate everything with one command (tests/ops/test_docgen.py fails until you do):

    .venv/bin/python scripts/docgen.py           # rewrite the marked sections, copy SVGs
    .venv/bin/python scripts/docgen.py --check   # exit 1 if anything is out of date

A development script: it reads the checkout (docs, snapshots) and is not part of the wheel.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import itertools
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec

from tiermem.core import config as config_model
from tiermem.core.environment import environment_reference
from tiermem.core.errors import PROCESS_EXIT_CODES, error_classes

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = {
    "config": DOCS / "configuration.md",
    "environment": DOCS / "configuration.md",
    "exit-codes": DOCS / "cli.md",
}
"""Which page holds each generated section (between its BEGIN and END markers)."""
SNAPSHOTS = REPO / "tests" / "tui" / "__snapshots__" / "test_snapshots"
SCREENSHOTS = REPO / "assets" / "screenshots"
SCREENSHOT_SOURCES = {
    "dashboard.svg": "test_screen[dashboard-120x40].svg",
    "search.svg": "test_search_with_explanation.svg",
}
"""assets/screenshots/NAME ← the snapshot test's SVG."""
COMMAND = ".venv/bin/python scripts/docgen.py"


# -- configuration reference -------------------------------------------------------------------


def _field_docs(cls: type) -> dict[str, str]:
    """The string literal right under each annotated field of a class body."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _doc(cls: type) -> str:
    return " ".join((inspect.getdoc(cls) or "").split())


def _bounds(info: Any) -> str:
    ge, gt = getattr(info, "ge", None), getattr(info, "gt", None)
    le, lt = getattr(info, "le", None), getattr(info, "lt", None)
    low = f"{ge:g}" if ge is not None else None
    high = f"{le:g}" if le is not None else None
    if low is not None and high is not None:
        return f" {low}–{high}"
    parts = []
    if gt is not None:
        parts.append(f"> {gt:g}")
    if low is not None:
        parts.append(f"≥ {low}")
    if lt is not None:
        parts.append(f"< {lt:g}")
    if high is not None:
        parts.append(f"≤ {high}")
    return (" " + ", ".join(parts)) if parts else ""


def _type(info: Any) -> str:
    if isinstance(info, msgspec.inspect.BoolType):
        return "boolean"
    if isinstance(info, msgspec.inspect.IntType):
        return "integer" + _bounds(info)
    if isinstance(info, msgspec.inspect.FloatType):
        return "number" + _bounds(info)
    if isinstance(info, msgspec.inspect.StrType):
        choices = re.fullmatch(r"\^\(([\w|-]+)\)\$", info.pattern or "")
        if choices:
            return " \\| ".join(f"`{c}`" for c in choices.group(1).split("|"))
        return "string"
    return type(info).__name__.removesuffix("Type").lower()


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def config_reference() -> str:
    """Markdown: one table per `config.toml` section."""
    root = config_model.Config
    info = msgspec.inspect.type_info(root)
    assert isinstance(info, msgspec.inspect.StructType)
    lines = ["Sections and keys of `config.toml`; every key is optional.", ""]
    for section in info.fields:
        struct, name = section.type, section.name
        if isinstance(struct, msgspec.inspect.DictType):  # `[agents.NAME]`: one per key
            struct, name = struct.value_type, f"{name}.NAME"
        assert isinstance(struct, msgspec.inspect.StructType)
        cls = struct.cls
        defaults = cls()
        docs = _field_docs(cls)
        lines += [f"**`[{name}]`** — {_doc(cls)}", ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for f in struct.fields:
            default = _toml(getattr(defaults, f.name))
            lines.append(
                f"| `{f.name}` | {_type(f.type)} | `{_cell(default)}` | "
                f"{_cell(docs.get(f.name, ''))} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- exit codes --------------------------------------------------------------------------------


def _first_sentence(cls: type) -> str:
    text = _doc(cls)
    match = re.match(r"(.+?\.)(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".")


def exit_codes_table() -> str:
    errors = error_classes()
    clash = sorted(set(errors) & set(PROCESS_EXIT_CODES))
    if clash:
        raise SystemExit(f"exit codes {clash} are used by both an error and the CLI itself")
    rows: dict[int, tuple[str, str]] = {c: (m, "") for c, m in PROCESS_EXIT_CODES.items()}
    for code, classes in errors.items():
        meaning = "; ".join(_first_sentence(c) for c in classes)
        names = ", ".join(f"`{c.__name__}`" for c in classes)
        rows[code] = (meaning, names)
    lines = ["| code | meaning | raised as |", "|---|---|---|"]
    for code, (meaning, names) in sorted(rows.items()):
        lines.append(f"| {code} | {_cell(meaning)} | {names} |")
    return "\n".join(lines) + "\n"


# -- the pages' sections and screenshots ---------------------------------------------------------


def sections() -> dict[str, str]:
    return {
        "config": config_reference(),
        "environment": environment_reference(),
        "exit-codes": exit_codes_table(),
    }


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- BEGIN GENERATED {name}: {COMMAND} -->\n",
        f"<!-- END GENERATED {name} -->",
    )


def render(text: str, generated: dict[str, str]) -> str:
    """`text` with each of the `generated` sections replaced (markers kept)."""
    for name, body in generated.items():
        begin, end = _markers(name)
        start = text.find(begin)
        stop = text.find(end)
        if start < 0 or stop < start:
            raise SystemExit(
                f"{PAGES[name].name} has no markers for the generated section {name!r}"
            )
        text = text[: start + len(begin)] + body + text[stop:]
    return text


def stale_pages() -> dict[Path, str]:
    """Each page whose generated sections are out of date → its text as it should be."""
    generated = sections()
    stale: dict[Path, str] = {}
    for page in sorted(set(PAGES.values())):
        current = page.read_text(encoding="utf-8")
        own = {name: body for name, body in generated.items() if PAGES[name] == page}
        wanted = render(current, own)
        if wanted != current:
            stale[page] = wanted
    return stale


def stale_screenshots() -> list[str]:
    """Screenshots missing or different from their snapshot (none when there is no checkout)."""
    if not SNAPSHOTS.is_dir():
        return []
    return [
        name
        for name, source in SCREENSHOT_SOURCES.items()
        if not (SCREENSHOTS / name).is_file()
        or (SCREENSHOTS / name).read_bytes() != (SNAPSHOTS / source).read_bytes()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/docgen.py", description=__doc__)
    parser.add_argument("--check", action="store_true", help="Change nothing; exit 1 if stale.")
    parser.add_argument("--print", dest="show", choices=sorted(sections()), help="Print a section.")
    args = parser.parse_args(argv)
    if args.show:
        sys.stdout.write(sections()[args.show])
        return 0
    pages = stale_pages()
    stale = stale_screenshots()
    if args.check:
        problems = [str(page.relative_to(REPO)) for page in pages] + stale
        if problems:
            print(f"out of date: {', '.join(problems)}; run {COMMAND}")
            return 1
        return 0
    for page, wanted in pages.items():
        page.write_text(wanted, encoding="utf-8")
        print(f"{page.relative_to(REPO)} updated")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name in stale:
        shutil.copyfile(SNAPSHOTS / SCREENSHOT_SOURCES[name], SCREENSHOTS / name)
        print(f"assets/screenshots/{name} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
