"""`sync check` against damage injected straight into the real sqld's tables: every class is
found with its exit code, and a clean vault of 1,000+ records raises no alarm."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import START, Clock
from tests.sync.helpers import (
    PASSPHRASE,
    conversation_end,
    init_engine,
    policy,
    seed_memory,
    tag_of,
)
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.warm import NewFact
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import prune, restore
from tiermem.sync.restore.check import DAMAGE_EXIT_CODES, CheckReport, check
from tiermem.sync.state import wrap_id
from tiermem.sync.vault.hrana import HranaClient

Row = tuple[int, bytes, str, int, bytes, bytes]  # seq, record_id, version, epoch, device, envelope


def facts(n: int, start: int = 0) -> list[NewFact]:
    return [
        NewFact(
            text=f"{['quartz', 'basalt', 'gneiss', 'shale'][i % 4]} sample "
            f"{hashlib.sha256(str(i).encode()).hexdigest()[:20]} was logged",
            category=f"geology/{['quartz', 'basalt', 'gneiss', 'shale'][i % 4]}",
            importance=0.2 + (i % 8) / 10,
        )
        for i in range(start, start + n)
    ]


def remote_rows(client: HranaClient, mem: Memory) -> list[Row]:
    out: list[Row] = []
    for r in client.execute(
        "SELECT seq, record_id, version, epoch, device_id, envelope FROM records "
        "WHERE agent_tag = ? ORDER BY seq",
        (tag_of(mem),),
    ).rows:
        seq, rid, version, epoch, device, envelope = r
        assert isinstance(seq, int) and isinstance(rid, bytes) and isinstance(version, str)
        assert isinstance(epoch, int) and isinstance(device, bytes)
        assert isinstance(envelope, bytes)
        out.append((seq, rid, version, epoch, device, envelope))
    return out


def set_envelope(client: HranaClient, seq: int, envelope: bytes) -> None:
    client.execute("UPDATE records SET envelope = ? WHERE seq = ?", (envelope, seq))


def reinsert(client: HranaClient, mem: Memory, rows: list[Row]) -> None:
    for seq, rid, version, epoch, device, envelope in rows:
        client.execute(
            "INSERT INTO records (seq, agent_tag, record_id, version, epoch, device_id, "
            "envelope) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (seq, tag_of(mem), rid, version, epoch, device, envelope),
        )


Vault = tuple[Memory, SyncEngine, bytes]


def pushed_vault(root: Path, agent_id: str, sqld: SqldServer, n: int = 30) -> Iterator[Vault]:
    """A vault with critical state and `n` memories over three pushes (updates, a tombstone)."""
    clock = Clock(START)
    with Memory(root, agent_id, clock=clock) as mem:
        seed_memory(mem)
        mem.store_many(facts(n // 2))
        engine, key = init_engine(mem, sqld.url, sqld.token, passphrase=PASSPHRASE)
        assert engine.push(policy()).pushed
        clock.now += 60
        mem.store_many(facts(n - n // 2, start=n // 2))
        conversation_end(mem, 1)
        assert engine.push(policy()).pushed
        clock.now += 60
        ids = [str(r[0]) for r in mem.db.query("SELECT id FROM memories ORDER BY seq LIMIT 3")]
        with mem.db.transaction():
            mem.memories.move(ids[:2], "cold", mem.now())
            mem.memories.delete(ids[2:])
        conversation_end(mem, 2)
        assert engine.push(policy()).pushed
        try:
            yield mem, engine, key
        finally:
            engine.close()


@pytest.fixture
def vault(tmp_path: Path, agent_id: str, sqld: SqldServer) -> Iterator[Vault]:
    yield from pushed_vault(tmp_path / "home", agent_id, sqld)


def run_check(engine: SyncEngine, read_data: bool = True) -> CheckReport:
    return check(engine, read_data=read_data, policy=policy())


def assert_clean(engine: SyncEngine) -> None:
    for read_data in (False, True):
        report = run_check(engine, read_data)
        assert report.ok and report.exit_code == 0, report.problems


def test_a_clean_vault_checks_clean_and_counts_what_it_read(vault: Vault) -> None:
    mem, engine, _ = vault
    structure = run_check(engine, read_data=False)
    full = run_check(engine, read_data=True)
    assert structure.ok and full.ok, (structure.problems, full.problems)
    assert full.manifests == 3 and full.devices == 1 and full.lines == full.rows - 3
    assert full.decrypted == full.rows and structure.decrypted == structure.manifests
    live = int(mem.db.scalar("SELECT count(*) FROM memories WHERE agent_id = ?", (mem.agent_id,)))
    # + the tombstoned id + critical + this device's metrics
    assert live == 29 and full.records == live + 1 + 1 + 1


@pytest.mark.parametrize("seed", range(3))
def test_bit_flips_anywhere_in_any_record_are_found(
    vault: Vault, client: HranaClient, seed: int
) -> None:
    mem, engine, _ = vault
    rng = random.Random(seed)
    rows = remote_rows(client, mem)
    for row in rng.sample(rows, 8):
        seq, envelope = row[0], row[5]
        bit = rng.randrange(len(envelope) * 8)
        flipped = bytearray(envelope)
        flipped[bit // 8] ^= 1 << (bit % 8)
        set_envelope(client, seq, bytes(flipped))
        report = run_check(engine)
        assert report.exit_code == DAMAGE_EXIT_CODES["tampered"], (seed, seq, bit)
        set_envelope(client, seq, envelope)
    assert_clean(engine)


def test_rows_swapped_between_tables_are_found(vault: Vault, client: HranaClient) -> None:
    mem, engine, _ = vault
    rows = remote_rows(client, mem)
    critical = max((r for r in rows if len(r[5]) > 4000), key=lambda r: r[0])
    memory = next(r for r in rows if len(r[5]) < 1000 and r[2] == critical[2])
    set_envelope(client, critical[0], memory[5])
    set_envelope(client, memory[0], critical[5])
    assert run_check(engine).exit_code == 40
    set_envelope(client, critical[0], critical[5])
    set_envelope(client, memory[0], memory[5])
    # A memory's envelope under another memory's record id (same size class).
    a, b = [r for r in rows if len(r[5]) < 1000 and r[2] == critical[2]][:2]
    set_envelope(client, a[0], b[5])
    assert run_check(engine).exit_code == 40
    set_envelope(client, a[0], a[5])
    assert_clean(engine)


def test_rows_swapped_between_agents_are_found_even_without_reading_data(
    tmp_path: Path, vault: Vault, client: HranaClient, sqld: SqldServer
) -> None:
    mem, engine, _ = vault
    for other_mem, other_engine, _ in pushed_vault(
        tmp_path / "other", "other-" + mem.agent_id, sqld, n=6
    ):
        mine = remote_rows(client, mem)[3]
        theirs = remote_rows(client, other_mem)[2]
        tag, other_tag = tag_of(mem), tag_of(other_mem)
        client.execute("UPDATE records SET agent_tag = ? WHERE seq = ?", (other_tag, mine[0]))
        client.execute("UPDATE records SET agent_tag = ? WHERE seq = ?", (tag, theirs[0]))
        for read_data in (False, True):
            for e in (engine, other_engine):
                report = run_check(e, read_data)
                assert report.exit_code == 40, report.problems
                assert report.counts["tampered"] >= 1 and report.counts["missing"] == 1
        client.execute("UPDATE records SET agent_tag = ? WHERE seq = ?", (tag, mine[0]))
        client.execute("UPDATE records SET agent_tag = ? WHERE seq = ?", (other_tag, theirs[0]))
        assert_clean(other_engine)
    assert_clean(engine)


def test_a_replayed_old_state_is_a_rollback(vault: Vault, client: HranaClient) -> None:
    """The server drops the newest push (records and manifest): what it shows is an old,
    consistent state, which only this home's memory of its own pushes can reveal."""
    mem, engine, _ = vault
    rows = remote_rows(client, mem)
    newest = max(r[2] for r in rows)
    dropped = [r for r in rows if r[2] == newest]
    client.execute("DELETE FROM records WHERE version = ?", (newest,))
    for read_data in (False, True):
        report = run_check(engine, read_data)
        assert report.exit_code == 42 and report.counts == {
            "tampered": 0,
            "missing": 0,
            "rollback": 2,  # this device's push counter, the newest critical state
            "wraps": 0,
            "roster": 0,
        }, report.problems
    reinsert(client, mem, dropped)
    assert_clean(engine)


def test_an_old_version_relabelled_as_new_is_found(vault: Vault, client: HranaClient) -> None:
    mem, engine, _ = vault
    rows = remote_rows(client, mem)
    old_critical = min((r for r in rows if len(r[5]) > 4000), key=lambda r: r[0])
    newest = max(r[2] for r in rows)
    newer = newest[:6] + str(int(newest[6:18]) + 1).zfill(12) + newest[18:]
    client.execute(
        "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, envelope) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (tag_of(mem), old_critical[1], newer, *old_critical[3:]),
    )
    for read_data in (False, True):  # not listed by any manifest: found without reading data
        assert run_check(engine, read_data).exit_code == 40
    client.execute("DELETE FROM records WHERE version = ?", (newer,))
    assert_clean(engine)


def test_a_middle_push_gone_is_a_gap(vault: Vault, client: HranaClient) -> None:
    mem, engine, _ = vault
    rows = remote_rows(client, mem)
    middle = sorted({r[2] for r in rows})[1]
    dropped = [r for r in rows if r[2] == middle]
    client.execute("DELETE FROM records WHERE version = ?", (middle,))
    report = run_check(engine, read_data=False)
    assert report.exit_code == 42 and "missing" in report.problems[0].message
    reinsert(client, mem, dropped)
    assert_clean(engine)


@pytest.mark.parametrize("seed", range(3))
def test_every_deleted_record_is_found(vault: Vault, client: HranaClient, seed: int) -> None:
    mem, engine, _ = vault
    rng = random.Random(seed)
    for _ in range(5):
        rows = remote_rows(client, mem)
        manifests = {r[2] for r in rows}
        target = rng.choice([r for r in rows if r[2] in manifests])
        client.execute("DELETE FROM records WHERE seq = ?", (target[0],))
        report = run_check(engine, read_data=False)
        # A manifest deleted on its own leaves its records unlisted (40) or, as the
        # newest, the server behind this home (42); any other record is missing (41), and
        # the newest critical state missing also puts the server behind this home (42).
        assert report.exit_code in (40, 41, 42) and not report.ok
        if report.counts["missing"] == 0:
            assert any("manifest" in p.message or "behind" in p.message for p in report.problems)
        else:
            behind = any("newest critical state" in p.message for p in report.problems)
            assert report.exit_code in (40, 41) or behind, report.problems
        reinsert(client, mem, [target])
    assert_clean(engine)


def test_a_deleted_memory_record_is_missing(vault: Vault, client: HranaClient) -> None:
    mem, engine, _ = vault
    rows = remote_rows(client, mem)
    memory = next(r for r in rows if len(r[5]) < 1000)
    client.execute("DELETE FROM records WHERE seq = ?", (memory[0],))
    for read_data in (False, True):
        report = run_check(engine, read_data)
        assert report.exit_code == 41 and report.counts["missing"] == 1, report.problems
    reinsert(client, mem, [memory])
    assert_clean(engine)


@pytest.mark.parametrize("cut", [1, 16, 100, 0.5])
def test_truncated_blobs_are_found_without_reading_data(
    vault: Vault, client: HranaClient, cut: float
) -> None:
    mem, engine, _ = vault
    for row in remote_rows(client, mem)[::7]:
        envelope = row[5]
        keep = int(len(envelope) * cut) if cut < 1 else len(envelope) - int(cut)
        set_envelope(client, row[0], envelope[:keep])
        for read_data in (False, True):
            assert run_check(engine, read_data).exit_code == 40
        set_envelope(client, row[0], envelope)
    assert_clean(engine)


@pytest.mark.parametrize("kind", ["recovery", "passphrase", "device"])
def test_a_dropped_key_wrap_is_found(vault: Vault, client: HranaClient, kind: str) -> None:
    _, engine, _ = vault
    s = engine.require_ready()
    extra = s.device_id if kind == "device" else b""
    wid = wrap_id(s.tag, s.epoch, kind, extra)
    ((blob, epoch),) = client.execute(
        "SELECT blob, epoch FROM key_wraps WHERE wrap_id = ?", (wid,)
    ).rows
    client.execute("DELETE FROM key_wraps WHERE wrap_id = ?", (wid,))
    report = run_check(engine, read_data=False)
    assert report.exit_code == 43 and report.counts["wraps"] >= 1, report.problems
    client.execute(
        "INSERT INTO key_wraps (wrap_id, agent_tag, epoch, kind, blob) VALUES (?, ?, ?, ?, ?)",
        (wid, s.tag, epoch, kind, blob),
    )
    assert_clean(engine)


def test_a_thousand_clean_records_from_two_devices_with_pruning_raise_no_alarm(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    clock = Clock(START)
    with Memory(tmp_path / "a", agent_id, clock=clock) as mem:
        seed_memory(mem)
        mem.store_many(facts(700))
        engine, key = init_engine(mem, sqld.url, sqld.token)
        assert engine.push(policy()).pushed
        clock.now += 60
        mem.store_many(facts(300, start=700))
        ids = [str(r[0]) for r in mem.db.query("SELECT id FROM memories ORDER BY seq LIMIT 40")]
        for i in range(4):  # versions to prune
            clock.now += 60
            with mem.db.transaction():
                mem.memories.move(ids, "cold" if i % 2 == 0 else "warm", mem.now())
            conversation_end(mem, i)
            assert engine.push(policy()).pushed
        restore(tmp_path / "b", agent_id, sqld.url, sqld.token, recovery_key=key)
        with Memory(tmp_path / "b", agent_id) as other, SyncEngine(other) as second:
            other.store_many(facts(20, start=5000))
            with other.db.transaction():
                other.memories.delete(ids[:5])
            assert second.push(policy()).pushed
            assert engine.pull(policy()).applied >= 25
            pruned = prune(engine, keep_versions=2, policy=policy())
            assert pruned.deleted >= 80
            for e in (engine, second):
                for read_data in (False, True):
                    report = run_check(e, read_data)
                    assert report.ok, report.problems[:5]
                    # the manifests went into the checkpoint without the lines of what was
                    # pruned: every line left names a row that is there
                    assert report.records >= 1000 and report.pruned == 0
                    assert report.manifests == 0 and report.lines == pruned.checkpoint_lines
        engine.close()


def test_check_on_the_command_line_exits_with_the_damage_code(
    vault: Vault, client: HranaClient, sqld: SqldServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tiermem.tui.cli import run

    mem, _, _ = vault
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    args = ["--home", str(mem.home.root), "--agent-id", mem.agent_id, "--json", "sync", "check"]
    assert run(args) == 0
    assert run([*args, "--read-data"]) == 0
    memory = next(r for r in remote_rows(client, mem) if len(r[5]) < 1000)
    client.execute("DELETE FROM records WHERE seq = ?", (memory[0],))
    assert run(args) == 41
    reinsert(client, mem, [memory])
    assert run(args) == 0
