"""Memory as a folder of markdown files: export, edit, delete, add, import back, idempotently."""

from __future__ import annotations

from pathlib import Path

from tests.clikit import Cli


def facts(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in (folder / "semantic").rglob("*.md")}


def test_export_edit_delete_and_import_back(cli: Cli, tmp_path: Path) -> None:
    keep = cli.json(
        "store", "--text", "The cat is called Miso", "--category", "home/pets", "--tag", "cat"
    )["id"]
    edit = cli.json("store", "--text", "Gym on Tuesdays", "--category", "health")["id"]
    drop = cli.json(
        "store", "--text", "The old router password hint is blue", "--category", "home"
    )["id"]
    cli.json("hot", "--add-lesson", "Always confirm before deleting files")
    out = tmp_path / "mem"
    written = cli.json("export", "--format", "folder", str(out))
    assert written["files"] >= 4 and (out / "MEMORY.md").is_file()
    files = facts(out)
    assert set(files) == {keep, edit, drop}
    assert files[keep].parent == out / "semantic" / "home" / "pets"
    assert 'tags: ["cat"]' in files[keep].read_text()

    files[edit].write_text(files[edit].read_text().replace("Gym on Tuesdays", "Gym on Thursdays"))
    code, _, err = cli("export", "--format", "folder", str(out))  # would overwrite the edit
    assert code == 3 and "not imported yet" in err
    assert "Thursdays" in files[edit].read_text()
    files[drop].unlink()
    (out / "semantic" / "health" / "new.md").write_text(
        '---\ncategory: "health"\ntags: ["sleep"]\n---\nBed by 23:00 on weekdays\n'
    )
    memory_md = out / "MEMORY.md"
    memory_md.write_text(
        memory_md.read_text().replace(
            "Always confirm before deleting files", "Always confirm before deleting or moving files"
        )
    )
    done = cli.json("import", str(out))
    assert len(done["edited"]) == 1 and len(done["stored"]) == 1 and done["forgotten"] == [drop]
    assert done["hot_edited"]
    assert cli.json("retrieve", "gym thursdays")["results"][0]["text"] == "Gym on Thursdays"
    assert cli.json("retrieve", "router password")["results"] == []
    assert cli.json("retrieve", "sleep")["results"][0]["text"] == "Bed by 23:00 on weekdays"
    lessons = cli.json("hot")["hot"]["critical_lessons"]
    assert [x["text"] for x in lessons] == ["Always confirm before deleting or moving files"]
    assert cli.json("unforget", drop)  # deletion archived, never lost

    again = cli.json("import", str(out))  # the folder was rewritten: nothing left to apply
    assert again["edited"] == again["stored"] == again["forgotten"] == []
    assert not again["hot_edited"]
    exported = cli.json("export", "--format", "json")["memories"]
    assert set(facts(out)) == {m["id"] for m in exported} and drop in facts(out)


def test_export_refuses_a_folder_that_is_not_an_export(cli: Cli, tmp_path: Path) -> None:
    cli.json("store", "--text", "Anything", "--category", "x")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    code, _, err = cli("export", "--format", "folder", str(busy))
    assert code == 3 and "not empty" in err
    assert (busy / "notes.txt").read_text() == "mine"


def test_a_refused_edit_applies_nothing_and_says_why(cli: Cli, tmp_path: Path) -> None:
    one = cli.json("store", "--text", "Tea at four", "--category", "habits")["id"]
    two = cli.json("store", "--text", "Coffee at nine", "--category", "habits")["id"]
    three = cli.json("store", "--text", "Walk at noon", "--category", "habits")["id"]
    out = tmp_path / "mem"
    cli.json("export", "--format", "folder", str(out))
    files = facts(out)
    files[three].unlink()
    files[two].write_text(files[two].read_text().replace("Coffee at nine", "Tea at four"))
    code, _, err = cli("import", str(out))
    assert code == 3 and one in err and "Traceback" not in err
    texts = {r["text"] for r in cli.json("export", "--format", "json")["memories"]}
    assert texts == {"Tea at four", "Coffee at nine", "Walk at noon"}  # nothing applied


def test_bad_files_are_one_clear_line_and_stray_files_are_ignored(cli: Cli, tmp_path: Path) -> None:
    kept = cli.json("store", "--text", "Plants need water on Sundays", "--category", "home")["id"]
    out = tmp_path / "mem"
    cli.json("export", "--format", "folder", str(out))
    (out / ".DS_Store").write_bytes(b"\x00\xff\xfe binary")
    assert cli.json("import", str(out))["edited"] == []
    assert (out / ".DS_Store").exists()  # not ours: left alone
    assert cli.json("export", "--format", "folder", str(out))["files"] >= 2
    path = facts(out)[kept]
    path.write_text(path.read_text().replace("importance: 0.5", 'importance: "lots"'))
    code, _, err = cli("import", str(out))
    assert code == 3 and "importance" in err and kept in err and "Traceback" not in err
    path.write_bytes(b"\xff\xfe\x00 not text")
    code, _, err = cli("import", str(out))
    assert code == 3 and "not UTF-8" in err
    assert cli.json("get", kept)["text"] == "Plants need water on Sundays"
