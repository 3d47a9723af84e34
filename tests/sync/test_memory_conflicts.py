"""Two devices that edit one memory while apart: fields that do not clash merge, a clash keeps
one value and lists the other as a conflict `memory/<id>` on every device, in any order of
pushes and pulls; `sync resolve --take local|remote` settles it everywhere. Through the CLI on
a real sqld with JWT auth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.sync.memory_conflictkit import ORDERS, TEXT, Vault, make_vault, run_order
from tests.sync.sqld import SqldServer
from tiermem.core import curate, hygiene, rows
from tiermem.core.engine import Memory
from tiermem.core.rows import MemoryRow
from tiermem.sync import crypto, memory_record
from tiermem.sync.kinds import memory_merge


@pytest.fixture
def vault(
    capsys: pytest.CaptureFixture[str],
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Vault:
    return make_vault(capsys, agent_id, sqld, monkeypatch, tmp_path)


def _settled(v: Vault) -> dict[str, Any]:
    """Both devices hold the same memory and list the same open conflicts; returns it."""
    desk, phone = v.state(v.desk), v.state(v.phone)
    assert desk == phone
    ids = {c["id"] for c in v.conflicts(v.desk)}
    assert ids == {c["id"] for c in v.conflicts(v.phone)}
    return desk


@pytest.mark.parametrize("order", list(ORDERS))
def test_the_audit_lost_edit_becomes_a_conflict_and_the_other_field_merges(
    vault: Vault, order: str
) -> None:
    v = vault
    v.tm(v.desk, "edit", v.memory_id, "--text", "EDIT-A: the boiler code is 5512")
    v.tm(v.phone, "edit", v.memory_id, "--text", "EDIT-B: boiler code 9981", "--importance", "0.9")
    run_order(v, order)
    final = _settled(v)
    assert final["importance"] == 0.9  # only the phone changed it: merged, no record
    [record] = v.conflicts(v.desk)
    assert record["item"] == f"memory/{v.memory_id}" and record["field"] == "text"
    texts = {record["kept_value"], record["lost_value"]}
    assert texts == {"EDIT-A: the boiler code is 5512", "EDIT-B: boiler code 9981"}
    assert final["text"] == record["kept_value"]
    assert record["about"] == final["text"]  # named by what it is about, id beside it


@pytest.mark.parametrize("order", list(ORDERS))
def test_edits_of_different_fields_both_stay_without_a_conflict(vault: Vault, order: str) -> None:
    v = vault
    other = v.tm(v.desk, "store", "--text", "the plumber is called ada", "--category", "home")
    v.tm(v.desk, "sync", "now")
    v.tm(v.phone, "sync", "now")
    v.tm(v.desk, "edit", v.memory_id, "--text", "the boiler code is 5512 since may")
    v.tm(v.desk, "pin", v.memory_id)
    v.tm(v.phone, "edit", v.memory_id, "--importance", "0.8", "--category", "house/boiler")
    v.tm(v.phone, "link", v.memory_id, other["id"])
    run_order(v, order)
    final = _settled(v)
    assert final["text"] == "the boiler code is 5512 since may" and final["pinned"]
    assert final["importance"] == 0.8 and final["category"] == "house/boiler"
    assert final["links"] == [other["id"]]
    assert v.conflicts(v.desk, every=True) == []


def _set_expiry(v: Vault, home: Path, when: float) -> None:
    with Memory(home, v.tm.agent_id) as mem, mem.db.transaction():
        hygiene.set_extras(mem, v.memory_id, [], when)


def _link_new(v: Vault, home: Path, text: str) -> None:
    v.tm(home, "link", v.memory_id, v.tm(home, "store", "--text", text)["id"])


def _clash(v: Vault, kind: str, home: Path, value: str) -> None:
    """Change one field kind of the memory on `home` to `value`."""
    if kind == "expiry":
        _set_expiry(v, home, float(value))
    elif kind == "links":
        _link_new(v, home, value)
    elif kind == "tags":
        v.tm(home, "store", "--text", TEXT, "--tag", value)
    elif kind == "supersession":
        v.tm(home, "supersede", v.memory_id, "--at", value)
    else:
        v.tm(home, "edit", v.memory_id, f"--{kind}", value)


CLASHES: dict[str, tuple[str, str, str]] = {
    "category": ("category", "house/boiler", "utilities"),
    "importance": ("importance", "0.3", "0.95"),
    "tags": ("tags", "boiler", "codes"),
    "expiry": ("expires_at", "2000000000", "2100000000"),
    "links": ("links", "the fuse box is in the hall", "the stopcock is under the sink"),
    "supersession": ("superseded", "2026-03-01", "2026-04-01"),
}
"""field kind → (its group in a conflict record, the desk's value, the phone's)"""


@pytest.mark.parametrize("kind", list(CLASHES))
@pytest.mark.parametrize("order", ["desk pushes, phone merges", "both push, then both pull"])
def test_a_clash_in_each_field_kind_is_listed_on_both_devices(
    vault: Vault, kind: str, order: str
) -> None:
    v = vault
    group, on_desk, on_phone = CLASHES[kind]
    _clash(v, kind, v.desk, on_desk)
    _clash(v, kind, v.phone, on_phone)
    run_order(v, order)
    _settled(v)
    found = [c for c in v.conflicts(v.desk) if c["item"] == f"memory/{v.memory_id}"]
    assert [c["field"] for c in found] == [group]
    assert found[0]["kept_value"] != found[0]["lost_value"]


def test_a_delete_facing_an_edit_keeps_the_memory_and_lists_the_delete(vault: Vault) -> None:
    v = vault
    with Memory(v.desk, v.tm.agent_id) as mem:  # as the TUI's forget does
        curate.move_to_forgotten(mem, v.memory_id)
    v.tm(v.phone, "edit", v.memory_id, "--text", "the boiler code is 1234 now")
    run_order(v, "both push, then both pull")
    final = _settled(v)
    assert final["text"] == "the boiler code is 1234 now"
    [record] = v.conflicts(v.phone)
    assert (record["field"], record["lost_value"]) == ("alive", None)


@pytest.mark.parametrize("take", ["local", "remote"])
def test_a_resolution_applies_and_reaches_every_device(vault: Vault, take: str) -> None:
    v = vault
    v.tm(v.desk, "edit", v.memory_id, "--text", "desk says 1111")
    v.tm(v.phone, "edit", v.memory_id, "--text", "phone says 2222")
    run_order(v, "desk pushes, phone merges")  # the phone's edit, pending at its pull, is kept
    assert v.state(v.desk)["text"] == "phone says 2222"
    v.join_spare()
    [record] = v.conflicts(v.spare)  # a third device lists it too
    assert record["lost_value"] == "desk says 1111"
    # on the desk, `local` is its own lost text; `remote` the phone's kept one
    done = v.tm(v.desk, "sync", "resolve", record["id"][:8], "--take", take)
    assert done["applied"] == ("lost" if take == "local" else "kept")
    expected = "desk says 1111" if take == "local" else "phone says 2222"
    v.tm(v.desk, "sync", "now")
    for home in (v.phone, v.spare):
        v.tm(home, "sync", "now")
        assert v.state(home)["text"] == expected
        assert v.conflicts(home) == []
        [closed] = v.conflicts(home, every=True)
        assert closed["resolved"] and closed["resolution"] == "elsewhere"
    assert v.state(v.desk)["text"] == expected


def test_a_record_without_lineage_still_decodes_and_lineage_round_trips() -> None:
    row = MemoryRow(
        id="9de01e485272af93", text=TEXT, category="home", importance=0.5,
        created_at=1.0, access_count=0, last_access=None, tier="warm", tier_changed_at=1.0,
    )  # fmt: skip
    older = memory_record.decode_memory_version(memory_record.encode_memory(row))
    assert older.item == row and older.lineage is None  # what an older device wrote
    at = "000001767225600000.000000.0123456789abcdef0123456789abcdef"
    lineage = memory_record.Lineage({at[-32:]: at}, {"text": "", "tags": at})
    body = memory_record.encode_memory(row, lineage=lineage)
    assert memory_record.decode_memory_version(body).lineage == lineage
    forged = body.replace(b'"base":["', b'"base":["x')
    with pytest.raises(crypto.TamperedData):
        memory_record.decode_memory_version(forged)


def test_a_delete_after_winning_a_clash_is_not_undone_by_the_edit_it_beat(vault: Vault) -> None:
    v = vault
    v.tm(v.desk, "edit", v.memory_id, "--text", "desk says 1111")
    v.tm(v.desk, "sync", "push")
    v.tm(v.phone, "edit", v.memory_id, "--text", "phone says 2222")  # later: it wins the clash
    v.tm(v.phone, "sync", "push")
    v.join_spare()  # merges both: the phone's text stays, the desk's is a conflict
    assert v.state(v.spare)["text"] == "phone says 2222"
    with Memory(v.phone, v.tm.agent_id) as mem:  # the phone, still unaware of the desk's edit
        curate.move_to_forgotten(mem, v.memory_id)
    v.tm(v.phone, "sync", "push")
    for home in (v.phone, v.desk, v.spare, v.phone, v.desk):
        v.tm(home, "sync", "now")  # the phone meets the desk's edit only after its delete
    assert v.state(v.desk) == v.state(v.phone) == v.state(v.spare) == {}
    listed = {c["id"] for c in v.conflicts(v.desk)}
    assert (
        listed == {c["id"] for c in v.conflicts(v.phone)} == {c["id"] for c in v.conflicts(v.spare)}
    )


def test_every_field_of_a_memory_merges_in_one_group_or_is_named_as_merged_apart() -> None:
    """A field added to `MemoryRow` without a merge group would be merged by accident (one
    side's value kept, no conflict): each field is in one group, or in `UNGROUPED`."""
    grouped = [name for names in memory_merge.GROUPS.values() for name in names]
    assert len(grouped) == len(set(grouped))
    assert not set(grouped) & memory_merge.UNGROUPED
    assert set(grouped) | memory_merge.UNGROUPED == set(rows.NAMES)
