"""The critical-state document a push seals: stamped and read in one transaction, the same
document as stamping first and reading after, and the same field digests as ever."""

from __future__ import annotations

import hashlib

from tiermem.core import clocks, snapshot
from tiermem.core import hot as hotmod
from tiermem.core.engine import Memory

DEVICE = "ab" * 16


def fill(mem: Memory) -> None:
    mem.update_hot("identity", {"agent_name": "Claw"})
    mem.add_lesson("Always test on testnet", 0.9, "blockchain")
    mem.add_event("deployed the bridge")
    mem.add_project("EvoClaw", "framework", "active")
    mem.tree_add("projects/evoclaw/bsc", "BSC integration")


def edit_without_stamp(mem: Memory, text: str) -> None:
    """A change that skipped the stamp (an older tiermem, a hand edit of the database)."""
    state = mem.hot()
    state.critical_lessons[0].text = text
    with mem.db.transaction():
        mem.db.execute(
            "UPDATE hot_state SET data = ? WHERE agent_id = ?",
            (hotmod.encode(state).decode(), mem.agent_id),
        )


def writes(mem: Memory) -> int:
    return int(mem.db.scalar("SELECT total_changes()"))


def test_the_sealed_document_stamps_an_unstamped_change_like_stamp_then_document(
    mem: Memory, clock
) -> None:
    fill(mem)
    clock.advance(5)
    edit_without_stamp(mem, "Always test on a testnet first")
    doc = snapshot.stamped_document(mem, DEVICE)
    with mem.db.transaction():
        assert clocks.stamp(mem.db, mem.agent_id, mem.now()) is None  # nothing left over
    assert doc == snapshot.document(mem, DEVICE)
    lesson = f"lesson/{mem.hot().critical_lessons[0].id}"
    assert doc["hot"]["critical_lessons"][0]["text"] == "Always test on a testnet first"
    assert doc["clocks"][lesson]["text"] == doc["seen"][DEVICE]  # the newest stamp


def test_the_sealed_document_writes_nothing_when_every_change_was_stamped(mem: Memory) -> None:
    fill(mem)
    before = writes(mem)
    doc = snapshot.stamped_document(mem, DEVICE)
    assert writes(mem) == before
    assert doc == snapshot.document(mem, DEVICE)


def test_the_sealed_document_forgets_tombstones_as_stamp_does(mem: Memory, clock) -> None:
    fill(mem)
    old = clocks.stamp_text(int(mem.now() * 1000) - (clocks.TOMBSTONE_DAYS + 1) * 86_400_000, 0)
    with mem.db.transaction():
        mem.db.execute(
            "INSERT INTO crit_clocks (agent_id, item, field, stamp, device, digest) "
            "VALUES (?, 'event/gone', 'alive', ?, '', '')",
            (mem.agent_id, old),
        )
    doc = snapshot.stamped_document(mem, DEVICE)
    assert "event/gone" not in doc["clocks"]
    assert mem.db.scalar("SELECT count(*) FROM crit_clocks WHERE item = 'event/gone'") == 0


def test_clock_digests_tell_apart_values_json_tells_apart() -> None:
    values = [1, 1.0, True, 0, 0.0, -0.0, None, "1", float("inf"), 2.5, "zwölf"]
    for _ in range(2):  # the second round answers from what the first remembered
        digests = [clocks.digest(v) for v in values]
        expected = [
            hashlib.sha256(clocks.canonical_json(v).encode()).hexdigest()[:16] for v in values
        ]
        assert digests == expected
    assert len(set(digests)) == len(values)


def test_document_clocks_are_compact_clocks_after_every_change(mem: Memory, clock) -> None:
    fill(mem)
    for round_ in range(3):
        for device in (DEVICE, "cd" * 16):
            doc = snapshot.stamped_document(mem, device)
            rows, _ = clocks.read(mem.db, mem.agent_id)
            table = {
                item: {f: clocks.version(s, d or device) for f, (s, d) in fields.items()}
                for item, fields in rows.items()
            }
            values = clocks.current_values(mem.db, mem.agent_id)
            assert doc["clocks"] == clocks.compact(table, values)
        clock.advance(7)
        mem.update_hot("identity", {"agent_name": f"Claw {round_}"})
        mem.add_event(f"conversation {round_} ended")
