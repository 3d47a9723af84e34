"""Full restore through a real sqld: every warm/cold/frozen row back, usable at once, resumable,
swapped in at once, as of a point in time, and pruning that keeps what restores need."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import START, Clock
from tests.sync.helpers import conversation_end, init_engine, policy, seed_memory, tag_of
from tests.sync.sqld import SqldServer
from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.core.warm import NewFact
from tiermem.sync import crypto
from tiermem.sync.crypto.roster import (
    RECOVERY,
    RosterView,
    recovery_signing_key,
    signing_public_bytes,
    verify_roster,
)
from tiermem.sync.devices import roster_pin
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import (
    PointInTimePruned,
    RestoreProgress,
    parse_at,
    prune,
    restore,
    restore_pending,
)
from tiermem.sync.restore.prefetch import PAGES_IN_FLIGHT
from tiermem.sync.state import HomeNotEmpty
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import HranaClient

COLUMNS = (
    "id, text, category, importance, created_at, access_count, last_access, tier, "
    "tier_changed_at, urls, commands, paths, source, size_bytes, tokens, pinned"
)


def memories(mem: Memory) -> list[tuple[Any, ...]]:
    return [
        tuple(r)
        for r in mem.db.query(
            f"SELECT {COLUMNS} FROM memories WHERE agent_id = ? ORDER BY id", (mem.agent_id,)
        )
    ]


def critical(mem: Memory) -> tuple[object, ...]:
    """Hot state and tree shape (a node's last activity moves with every store and is not a
    change worth a push, so it is left out)."""
    state = snapshot.dump(mem)
    return state["hot"], [(n["path"], n["description"]) for n in state["tree"]]


def add_facts(mem: Memory, n: int, start: int = 0) -> list[str]:
    facts = [
        NewFact(
            text=f"fact number {i} about the {['otter', 'heron', 'lynx'][i % 3]} project",
            category=["projects/otter", "people/heron", "technical/lynx"][i % 3],
            importance=0.3 + (i % 7) / 10,
            urls=(f"https://example.org/{i}",) if i % 5 == 0 else (),
        )
        for i in range(start, start + n)
    ]
    return [o.id for o in mem.store_many(facts)]


def spread_tiers(mem: Memory, ids: list[str]) -> None:
    with mem.db.transaction():
        mem.memories.move(ids[::3], "cold", mem.now())
        mem.memories.move(ids[1::7], "frozen", mem.now())


Source = tuple[Memory, SyncEngine, bytes, Clock]


@pytest.fixture
def source(tmp_path: Path, agent_id: str, sqld: SqldServer) -> Iterator[Source]:
    """A home with critical state and 120 memories over three tiers, pushed."""
    clock = Clock(START)
    with Memory(tmp_path / "laptop", agent_id, clock=clock) as mem:
        seed_memory(mem)
        ids = add_facts(mem, 120)
        spread_tiers(mem, ids)
        engine, key = init_engine(mem, sqld.url, sqld.token)
        assert engine.push(policy()).pushed
        yield mem, engine, key, clock
        engine.close()


def test_full_restore_brings_back_every_memory_and_is_in_sync(
    tmp_path: Path, source: Source, sqld: SqldServer
) -> None:
    mem, engine, key, clock = source
    # A second device-like history: updates, a deletion (tombstone), new rows.
    clock.now += 60
    ids = [r[0] for r in memories(mem)]
    with mem.db.transaction():
        mem.memories.delete(ids[:2])
        mem.memories.move(ids[2:4], "warm", mem.now())
    add_facts(mem, 5, start=500)
    assert engine.push(policy()).pushed
    target = tmp_path / "new"
    result = restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, page_rows=7)
    assert result.memories == len(memories(mem)) == 123 and result.tombstones == 2
    assert result.pages > 3 and result.rows > result.memories and not result.resumed
    with Memory(target, mem.agent_id) as restored, SyncEngine(restored) as again:
        assert memories(restored) == memories(mem)
        assert critical(restored) == critical(mem)
        assert not restore_pending(target, mem.agent_id)
        # Nothing restored is pushed back, and nothing is left to pull.
        assert not again.has_work()
        assert again.pull(policy()).applied == 0
        hits = restored.retrieve("otter project").hits
        assert hits and all("otter" in h.memory.text for h in hits[:3])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["laptop", "new"]


def test_the_home_is_usable_before_the_memories_arrive_and_local_writes_survive(
    tmp_path: Path, source: Source, sqld: SqldServer
) -> None:
    mem, _, key, _ = source
    target = tmp_path / "new"
    seen: list[RestoreProgress] = []
    during: dict[str, Any] = {}

    def progress(p: RestoreProgress) -> None:
        seen.append(p)
        if p.phase == "critical":
            with Memory(target, mem.agent_id) as early:
                during["hot"] = critical(early)
                during["count"] = len(memories(early))
                during["context"] = early.retrieve("zebra testnet").hits
                early.store("a fact written while the restore ran", "notes/local", 0.9)

    result = restore(
        target,
        mem.agent_id,
        sqld.url,
        sqld.token,
        recovery_key=key,
        page_rows=10,
        progress=progress,
    )
    assert during["hot"] == critical(mem) and during["count"] == 0
    assert seen[0].phase == "critical" and seen[-1].phase == "done"
    assert all(p.usable for p in seen)
    rows = [p.rows for p in seen]
    assert rows == sorted(rows) and seen[-1].rows == seen[-1].total_rows == result.rows
    with Memory(target, mem.agent_id) as restored, SyncEngine(restored) as again:
        ids = {r[0] for r in memories(restored)}
        assert ids >= {r[0] for r in memories(mem)} and len(ids) == len(memories(mem)) + 1
        dirty = restored.db.query("SELECT id FROM sync_dirty WHERE agent_id = ?", (mem.agent_id,))
        local = restored.db.scalar(
            "SELECT id FROM memories WHERE agent_id = ? AND category = 'notes/local'",
            (mem.agent_id,),
        )
        assert [r[0] for r in dirty] == [local]  # only the local write is queued for pushing
        assert again.push(policy()).memories == 1


def test_a_device_signed_on_while_a_restore_streams_does_not_keep_it_off_the_roster(
    tmp_path: Path, source: Source, sqld: SqldServer
) -> None:
    mem, _, key, _ = source
    tag = tag_of(mem)
    owner = recovery_signing_key(key)
    other = bytes(range(16))

    def read(client: HranaClient) -> RosterView:
        bodies = roster_pin.read_bodies(client.execute, tag)
        return verify_roster(mem.agent_id, bodies, recovery_public=signing_public_bytes(owner))

    def another_device_joins(p: RestoreProgress) -> None:
        if p.phase == "critical":  # the restore read the roster before this
            with HranaClient(sqld.url, sqld.token) as client:
                draft = roster_pin.Draft(mem.agent_id, tag, read(client))
                box = crypto.device_public_bytes(crypto.generate_device_key())
                draft.add(other, box, None, owner, RECOVERY)
                client.batch(draft.statements)

    target = tmp_path / "new"
    restore(
        target,
        mem.agent_id,
        sqld.url,
        sqld.token,
        recovery_key=key,
        page_rows=10,
        progress=another_device_joins,
    )
    with Memory(target, mem.agent_id) as restored, SyncEngine(restored) as again:
        s = again.settings()
        assert s is not None
        with HranaClient(sqld.url, sqld.token) as client:
            devices = read(client).devices
        assert s.device_id in devices and other in devices
        assert again.push(policy()).pushed is False  # on the roster: nothing refused, in sync


class _PageCounter(httpx.HTTPTransport):
    """Counts the requests that return a page of records (what a restore holds in memory):
    windows of the vault and the warm records fetched by id ahead of them."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        window = store.restore_page(b"", (0, 0, None, [b"critical", b"prune"]), 0)[0]
        by_id = store.restore_records([b"warm"], b"", None, [], 0, 0)[0]
        body = request.read()
        response = super().handle_request(request)
        if any(sql.split("?")[0].encode() in body for sql in (window, by_id)):
            response.read()
            results = json.loads(response.content)["results"]
            self.pages += any(r.get("response", {}).get("result", {}).get("rows") for r in results)
        return response


def test_a_restore_fetches_a_few_pages_at_once_and_no_more_ahead_of_what_it_stored(
    tmp_path: Path, source: Source, sqld: SqldServer
) -> None:
    mem, _, key, _ = source
    counter = _PageCounter()
    ahead: list[int] = []

    def progress(p: RestoreProgress) -> None:
        if p.phase == "memories":
            time.sleep(0.05)  # a slow disk: the fetching thread must wait, not run on
            ahead.append(counter.pages - len(ahead) - 1)

    result = restore(
        tmp_path / "new",
        mem.agent_id,
        sqld.url,
        sqld.token,
        recovery_key=key,
        page_rows=10,
        progress=progress,
        transport=counter,
    )
    assert result.pages >= 12 and len(ahead) == result.pages
    # several windows in flight (their round trips overlap), never more than PAGES_IN_FLIGHT
    assert max(ahead) == PAGES_IN_FLIGHT and counter.pages == result.pages


def test_an_interrupted_restore_resumes_from_its_last_page_without_duplicates(
    tmp_path: Path, source: Source, sqld: SqldServer
) -> None:
    mem, _, key, _ = source
    target = tmp_path / "new"

    class Killed(Exception):
        pass

    def die_on_third_page(p: RestoreProgress) -> None:
        if p.phase == "memories" and p.rows >= 30:
            raise Killed

    with pytest.raises(Killed):
        restore(
            target,
            mem.agent_id,
            sqld.url,
            sqld.token,
            recovery_key=key,
            page_rows=10,
            progress=die_on_third_page,
        )
    assert restore_pending(target, mem.agent_id)
    with Memory(target, mem.agent_id) as half:
        found = memories(half)  # searchable as they arrive: only whole, verified memories
        assert 0 < len(found) < len(memories(mem)) and set(found) <= set(memories(mem))
        staged = int(half.db.scalar("SELECT count(*) FROM restore_staging"))
        assert 0 < staged < len(memories(mem))
    result = restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, page_rows=10)
    assert result.resumed and 0 < result.rows < 130
    with Memory(target, mem.agent_id) as restored:
        assert memories(restored) == memories(mem)
        assert int(restored.db.scalar("SELECT count(*) FROM restore_staging")) == 0
    again = restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key)
    assert again.refreshed and again.memories == 0  # restoring twice: harmless


def test_a_resumed_restore_must_ask_for_the_same_point_in_time(
    tmp_path: Path, source: Source, sqld: SqldServer
) -> None:
    mem, _, key, _ = source
    target = tmp_path / "new"

    def stop(p: RestoreProgress) -> None:
        if p.phase == "memories":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, progress=stop)
    with pytest.raises(HomeNotEmpty, match="same --at"):
        restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, at=str(START))
    restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key)
    assert not restore_pending(target, mem.agent_id)


def test_point_in_time_restores_each_record_as_it_was(
    tmp_path: Path, source: Source, sqld: SqldServer
) -> None:
    mem, engine, key, clock = source
    before_rows, before_state = memories(mem), critical(mem)
    first_version = engine.status().last_push_version
    assert first_version is not None
    clock.now += 3600
    ids = [r[0] for r in before_rows]
    with mem.db.transaction():
        mem.memories.delete(ids[:5])
        mem.memories.move(ids[5:10], "cold", mem.now())
    add_facts(mem, 4, start=900)
    conversation_end(mem, 3)
    assert engine.push(policy()).pushed
    assert memories(mem) != before_rows
    for label, at in (("by-version", first_version), ("by-time", str(START + 1800))):
        target = tmp_path / label
        result = restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, at=at)
        assert result.at == parse_at(at)
        with Memory(target, mem.agent_id) as restored:
            assert memories(restored) == before_rows
            assert critical(restored) == before_state
    newest = tmp_path / "newest"
    restore(newest, mem.agent_id, sqld.url, sqld.token, recovery_key=key)
    with Memory(newest, mem.agent_id) as restored:
        assert memories(restored) == memories(mem)


def test_parse_at_accepts_versions_seconds_and_iso_times() -> None:
    version = "000001767225600000.000003.0123456789abcdef0123456789abcdef"
    assert parse_at(version) == version
    assert parse_at("1767225600").startswith("000001767225600000.999999.")
    assert parse_at("2026-01-01T00:00:00+00:00") == parse_at("1767225600")
    with pytest.raises(Exception, match="ISO date"):
        parse_at("yesterday-ish")


def test_prune_keeps_the_newest_versions_and_refuses_points_before_its_horizon(
    tmp_path: Path, source: Source, sqld: SqldServer, client: HranaClient
) -> None:
    mem, engine, key, clock = source
    hot_id = memories(mem)[0][0]
    versions = []
    for i in range(6):
        clock.now += 60
        conversation_end(mem, i)
        with mem.db.transaction():
            mem.memories.move([hot_id], "cold" if i % 2 else "warm", mem.now())
        result = engine.push(policy())
        versions.append(result.version)
    tag = tag_of(mem)
    before = client.execute("SELECT count(*) FROM records WHERE agent_tag = ?", (tag,)).rows
    pruned = prune(engine, keep_versions=2, policy=policy())
    # critical: 7 versions, the moved memory: 7 versions -> 5 + 5 deleted; the 7 manifests
    # are compacted into a checkpoint of one part.
    assert pruned.deleted == 10 and pruned.horizon == versions[-2]
    assert pruned.compacted == 7 and pruned.checkpoint == 1
    after = client.execute("SELECT count(*) FROM records WHERE agent_tag = ?", (tag,)).rows
    assert int(str(before[0][0])) - int(str(after[0][0])) == 10 + 7 - 1
    assert prune(engine, keep_versions=2, policy=policy()).deleted == 0  # idempotent
    with pytest.raises(PointInTimePruned) as info:
        restore(
            tmp_path / "old", mem.agent_id, sqld.url, sqld.token, recovery_key=key, at=versions[0]
        )
    assert info.value.exit_code == 44 and not (tmp_path / "old").exists()
    target = tmp_path / "at-horizon"
    restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, at=versions[-1])
    with Memory(target, mem.agent_id) as restored:
        assert memories(restored) == memories(mem)
        assert critical(restored) == critical(mem)
    with pytest.raises(Exception, match="at least one"):
        prune(engine, keep_versions=0)


def test_a_damaged_memory_record_stops_the_restore_before_the_swap(
    tmp_path: Path, source: Source, sqld: SqldServer, client: HranaClient
) -> None:
    mem, _, key, _ = source
    tag = tag_of(mem)
    rows = client.execute(
        "SELECT seq, envelope FROM records WHERE agent_tag = ? ORDER BY seq DESC LIMIT 1 OFFSET 5",
        (tag,),
    ).rows
    seq, envelope = rows[0]
    assert isinstance(envelope, bytes)
    client.execute(
        "UPDATE records SET envelope = ? WHERE seq = ?",
        (envelope[:-1] + bytes([envelope[-1] ^ 1]), seq),
    )
    target = tmp_path / "new"
    with pytest.raises(crypto.TamperedData):
        restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key)
    with Memory(target, mem.agent_id) as half:
        assert memories(half) == [] and restore_pending(target, mem.agent_id)
    client.execute("UPDATE records SET envelope = ? WHERE seq = ?", (envelope, seq))
    assert restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key).resumed
    with Memory(target, mem.agent_id) as restored:
        assert memories(restored) == memories(mem)


def test_restore_prune_and_point_in_time_on_the_command_line(
    tmp_path: Path,
    source: Source,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from tiermem.tui.cli import run

    mem, engine, key, clock = source
    first = engine.status().last_push_version
    assert first is not None
    for i in range(3):
        clock.now += 60
        conversation_end(mem, i)
        assert engine.push(policy()).pushed
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(key))
    capsys.readouterr()

    def cli(*args: str, home: Path = mem.home.root) -> tuple[int, dict[str, Any], str]:
        code = run(["--home", str(home), "--agent-id", mem.agent_id, "--json", *args])
        out, err = capsys.readouterr()
        return code, json.loads(out) if out.strip() else {}, err

    code, restored, _ = cli("restore", "--url", sqld.url, "--at", first, home=tmp_path / "old")
    assert code == 0 and restored["at"] == first and restored["memories"] == 120
    code, pruned, _ = cli("sync", "prune", "--keep", "2")
    assert code == 0 and pruned["deleted"] == 2 and pruned["horizon"] > first
    code, _, err = cli("restore", "--url", sqld.url, "--at", first, home=tmp_path / "too-old")
    assert code == 44 and "were pruned" in err and err.count("\n") == 1
    code, checked, _ = cli("sync", "check", "--read-data")
    # the pruned versions' lines went with the manifests compacted into the checkpoint
    assert code == 0 and checked["pruned"] == 0 and checked["exit_code"] == 0
    assert checked["manifests"] == 0 and pruned["checkpoint"] == 1
    code, _, err = cli("restore", "--url", sqld.url, "--at", "soon", home=tmp_path / "x")
    assert code == 3 and "ISO date" in err


def test_restore_on_a_terminal_shows_a_progress_bar(
    tmp_path: Path, source: Source, sqld: SqldServer
) -> None:
    from tests.sync.devicekit import Terminal
    from tests.sync.test_cli_sync import PATIENCE, terminal_env

    mem, _, key, _ = source
    env = terminal_env(
        TIERMEM_SYNC_TOKEN=sqld.token, TIERMEM_RECOVERY_KEY=crypto.format_recovery_key(key)
    )
    args = ["--home", str(tmp_path / "t"), "--agent-id", mem.agent_id, "restore"]
    with Terminal([*args, "--url", sqld.url, "--page-rows", "10"], env, PATIENCE) as term:
        term.expect("the agent is usable now")
        term.expect("memories: 120 restored")
        assert term.finish() == 0
    shown = term.output  # everything the terminal showed
    assert "done (120 memories, 120 searchable)" in shown and "━" in shown
