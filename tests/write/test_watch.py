"""The watcher: real watchdog events on a real folder; results are polled with a deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import MemoryFactory
from tiermem.core.engine import Memory
from tiermem.core.ingest import daily_dir
from tiermem.core.watch import Watcher, WatchEvent

DEADLINE = 15.0  # a failure deadline, not a latency target (benchmarks measure latency)


def wait_for(check: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            raise AssertionError("not ingested before the deadline")
        time.sleep(0.02)


@pytest.fixture
def watching(
    open_memory: MemoryFactory,
) -> Iterator[Callable[..., tuple[Memory, list[WatchEvent]]]]:
    stops: list[tuple[threading.Event, threading.Thread, Watcher]] = []

    def start(debounce: float = 0.2) -> tuple[Memory, list[WatchEvent]]:
        mem = open_memory()
        events: list[WatchEvent] = []
        watcher = Watcher(mem, debounce=debounce).start()
        stop = threading.Event()
        thread = threading.Thread(target=watcher.run, args=(stop, events.append), daemon=True)
        thread.start()
        stops.append((stop, thread, watcher))
        return open_memory(), events

    yield start
    for stop, thread, watcher in stops:
        stop.set()
        watcher.wake()
        thread.join(5)
        watcher.stop()


def texts(mem: Memory) -> set[str]:
    return {m.text for chunk in mem.memories.iter_all() for m in chunk}


def test_new_and_edited_notes_are_ingested(watching) -> None:
    reader, events = watching()
    folder = daily_dir(reader)
    note = folder / "2026-01-05.md"
    note.write_text("- The router admin page moved to the garage shelf\n")
    wait_for(lambda: "The router admin page moved to the garage shelf" in texts(reader))
    note.write_text("- The router admin page moved to the attic shelf\n")
    wait_for(lambda: "The router admin page moved to the attic shelf" in texts(reader))
    wait_for(lambda: "The router admin page moved to the garage shelf" not in texts(reader))
    (folder / "notes.txt").write_text("- not a daily note, never ingested\n")
    (folder / ".2026-01-06.md.swp").write_text("- an editor's swap file\n")
    assert all(e.daily is not None and e.daily.name == "2026-01-05.md" for e in events)


def test_a_paused_write_is_not_ingested_half(watching) -> None:
    reader, events = watching(debounce=0.5)
    note = daily_dir(reader) / "2026-01-07.md"
    with note.open("w", encoding="utf-8") as handle:
        handle.write("- Grandma's phone number is in the green addr")
        handle.flush()
        time.sleep(0.05)  # the writer pauses well inside the debounce time
        handle.write("ess book\n- The spare tyre is in the boot of the red car\n")
    wait_for(lambda: len(events) == 1)
    assert texts(reader) == {
        "Grandma's phone number is in the green address book",
        "The spare tyre is in the boot of the red car",
    }
    assert [(e.daily.added, e.daily.forgotten) for e in events if e.daily] == [(2, 0)]


def test_atomic_rename_and_memory_md_edits(watching) -> None:
    reader, events = watching()
    folder = daily_dir(reader)
    tmp = folder / ".2026-01-08.md.tmp"
    tmp.write_text("- Saved through a temp file and a rename by the editor\n")
    tmp.rename(folder / "2026-01-08.md")
    wait_for(lambda: "Saved through a temp file and a rename by the editor" in texts(reader))
    reader.add_lesson("Check the oil before long drives", 0.8, "car")  # our own write: no event
    md = reader.home.memory_md(reader.agent_id)
    md.write_text(md.read_text().replace("[car] Check the oil", "[car] Check the oil and tyres"))
    wait_for(lambda: any(e.memory_md is not None for e in events))
    assert any("oil and tyres" in x.text for x in reader.hot().critical_lessons)
    assert [e.memory_md is not None for e in events].count(True) == 1


def test_cli_watch_catches_up_and_stops(capsys, tmp_path: Path) -> None:
    import json

    from tests.clikit import cli

    home = tmp_path / "home"
    folder = home / "memory"
    folder.mkdir(parents=True)
    (folder / "2026-01-09.md").write_text("- Written while the watcher was not running\n")
    code, out, err = cli(capsys, home, "--json", "watch", "--timeout", "0.5", "--debounce", "0.05")
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["daily"]["added"] for e in events] == [1]
