"""The generated parts of docs/ match the code: the configuration reference (config model),
the exit codes (error classes), the screenshots (TUI snapshots). When one fails, regenerate
with `.venv/bin/python scripts/docgen.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import msgspec

from tiermem.core import errors
from tiermem.core.config import Config

REPO = Path(__file__).resolve().parents[2]


def load_script(path: Path) -> ModuleType:
    """A development script of the checkout (not an installed module), imported by path."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


docgen = load_script(REPO / "scripts" / "docgen.py")
FIX = f"out of date: run `{docgen.COMMAND}` and commit the result"


def test_config_reference_is_current() -> None:
    text = docgen.PAGES["config"].read_text(encoding="utf-8")
    generated = docgen.config_reference()
    assert docgen.render(text, {"config": generated}) == text, FIX


def test_exit_codes_are_current() -> None:
    text = docgen.PAGES["exit-codes"].read_text(encoding="utf-8")
    generated = docgen.exit_codes_table()
    assert docgen.render(text, {"exit-codes": generated}) == text, FIX


def test_screenshots_are_the_current_snapshots() -> None:
    assert docgen.SNAPSHOTS.is_dir()
    assert docgen.stale_screenshots() == [], FIX
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in docgen.SCREENSHOT_SOURCES:
        assert (docgen.SCREENSHOTS / name).read_text().lstrip().startswith("<svg")
    assert "](assets/screenshots/dashboard.svg)" in readme


def test_check_mode_agrees(capsys) -> None:
    assert docgen.main(["--check"]) == 0, capsys.readouterr().out


def test_a_stale_section_is_found_on_its_page(monkeypatch, tmp_path, capsys) -> None:
    """A page whose generated section was edited by hand is named by --check and rewritten."""
    page = tmp_path / "cli.md"
    current = docgen.PAGES["exit-codes"].read_text(encoding="utf-8")
    page.write_text(current.replace("| 130 |", "| 131 |"), encoding="utf-8")
    monkeypatch.setattr(docgen, "REPO", tmp_path)
    monkeypatch.setattr(docgen, "PAGES", {**docgen.PAGES, "exit-codes": page})
    monkeypatch.setattr(docgen, "stale_screenshots", list)
    assert docgen.main(["--check"]) == 1
    assert "cli.md" in capsys.readouterr().out
    assert docgen.main([]) == 0
    assert page.read_text(encoding="utf-8") == current


def test_every_config_key_is_documented() -> None:
    reference = docgen.config_reference()
    info = msgspec.inspect.type_info(Config)
    assert isinstance(info, msgspec.inspect.StructType)
    for section in info.fields:
        struct, name = section.type, section.name
        if isinstance(struct, msgspec.inspect.DictType):  # [agents.NAME]
            struct, name = struct.value_type, f"{name}.NAME"
        assert f"**`[{name}]`**" in reference
        assert isinstance(struct, msgspec.inspect.StructType)
        docs = docgen._field_docs(struct.cls)
        for f in struct.fields:
            assert f"| `{f.name}` |" in reference
            if f.name not in ("model", "api_key"):  # self-explanatory, no docstring
                assert docs.get(f.name), f"[{section.name}] {f.name} has no docstring"


def test_each_exit_code_means_one_thing() -> None:
    """Two classes claiming one code, or a class claiming a process code, is a collision."""
    shared = {
        code: [c.__name__ for c in classes]
        for code, classes in errors.error_classes().items()
        if len(classes) > 1
    }
    assert shared == {}, f"exit codes used by more than one error class: {shared}"
    assert not set(errors.error_classes()) & set(errors.PROCESS_EXIT_CODES)


def test_every_damage_class_has_its_own_meaning() -> None:
    for code in errors.DAMAGE_EXIT_CODES.values():
        assert errors.PROCESS_EXIT_CODES[code].startswith("`sync check` found")
