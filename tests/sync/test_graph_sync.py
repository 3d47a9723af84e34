"""Episodes and the knowledge graph across devices against the real sqld: a conversation ended
on one device reaches the other with its episode and entities, a graph merge reaches it and is
not undone by an older copy of the merged entity, a fresh restore has both, and the server's
rows hold none of it in plaintext."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sync.helpers import desktop_and_phone, init_engine, policy, tag_of
from tests.sync.sqld import SqldServer
from tiermem.core import episodes
from tiermem.core import graph as graphmod
from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound, RecordDeleted
from tiermem.core.transcript import parse
from tiermem.sync import records
from tiermem.sync.engine import SyncEngine
from tiermem.sync.kinds.graph_records import read_item
from tiermem.sync.restore import restore
from tiermem.sync.restore.check import DAMAGE_EXIT_CODES, check
from tiermem.sync.vault.hrana import HranaClient

TRANSCRIPT = """user: Zephyrine works on Quillmark since March 2026. She prefers Postgres for it.
assistant: Noted, Quillmark stays on Postgres.
user: We decided to ship Quillmark on Fridays from now on.
"""


class Device:
    def __init__(self, mem: Memory, engine: SyncEngine) -> None:
        self.mem, self.engine = mem, engine

    def sync(self) -> None:
        self.engine.push(policy())
        self.engine.pull(policy())

    def graph(self) -> graphmod.GraphStore:
        return graphmod.store_for(self.mem)

    def marks(self) -> int:
        return int(
            self.mem.db.scalar(
                "SELECT count(*) FROM graph_dirty WHERE agent_id = ?", (self.mem.agent_id,)
            )
        )


@pytest.fixture
def devices(
    tmp_path: Path, sqld: SqldServer, agent_id: str
) -> Iterator[tuple[Device, Device, bytes]]:
    with desktop_and_phone(tmp_path, sqld.url, sqld.token, agent_id) as (a, b, key):
        yield Device(*a), Device(*b), key


def restored(tmp_path: Path, sqld: SqldServer, agent_id: str, key: bytes) -> Memory:
    target = tmp_path / "tablet"
    restore(target, agent_id, sqld.url, sqld.token, recovery_key=key, policy=policy())
    return Memory(target, agent_id)


def server_envelopes(client: HranaClient, mem: Memory) -> list[bytes]:
    result = client.execute("SELECT envelope FROM records WHERE agent_tag = ?", (tag_of(mem),))
    return [records.server_blob(r[0]) for r in result.rows if r[0] is not None]


def server_record_ids(client: HranaClient, mem: Memory) -> set[bytes]:
    result = client.execute("SELECT record_id FROM records WHERE agent_tag = ?", (tag_of(mem),))
    return {records.server_blob(r[0]) for r in result.rows}


def test_an_ended_conversation_reaches_the_other_device_and_a_restore_sealed(
    devices: tuple[Device, Device, bytes],
    tmp_path: Path,
    sqld: SqldServer,
    client: HranaClient,
) -> None:
    a, b, key = devices
    report = a.mem.conversation_end(parse(TRANSCRIPT), TRANSCRIPT)
    assert report.episode is not None
    episode = report.episode
    quill = a.graph().find("Quillmark")
    assert a.engine.status().pending_graph == a.marks() >= 3  # the episode and its entities
    a.engine.push(policy())
    assert a.marks() == a.engine.status().pending_graph == 0  # confirmed on the server

    b.engine.pull(policy())
    got = episodes.get(b.mem.db, b.mem.agent_id, episode.id)
    assert (got.abstract, got.fact_ids) == (episode.abstract, episode.fact_ids)
    assert b.graph().find("Quillmark").id == quill.id
    zephyrine = b.graph().find("Zephyrine")
    assert [(e.predicate, e.object) for e in b.graph().edges(zephyrine.id)] == [
        ("works_on", quill.id)
    ]
    assert b.mem.db.scalar(  # the episode's keyword index knows it
        "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH 'quillmark'"
    )
    assert b.marks() == 0  # applied, not pushed back
    b.engine.push(policy())
    a.engine.pull(policy())
    assert a.marks() == 0

    with restored(tmp_path, sqld, a.mem.agent_id, key) as tablet:
        assert episodes.get(tablet.db, tablet.agent_id, episode.id).summary == episode.summary
        assert graphmod.store_for(tablet).find("Zephyrine").id == zephyrine.id
        assert tablet.db.scalar("SELECT count(*) FROM graph_dirty") == 0

    envelopes = server_envelopes(client, a.mem)
    graph_rids = {
        records.record_id(a.engine.id_key(), records.GRAPH_TABLE, f"entity:{quill.id}"),
        records.record_id(a.engine.id_key(), records.GRAPH_TABLE, f"episode:{episode.id}"),
    }
    assert graph_rids <= server_record_ids(client, a.mem)  # they were sent, sealed
    plaintext = read_item(a.mem.db, a.mem.agent_id, "entity", quill.id).encode()
    assert b"Quillmark" in plaintext  # the scan below would see it if it were sent as is
    for secret in (b"Quillmark", b"Zephyrine", b"Postgres", episode.abstract[:20].encode()):
        assert not any(secret in env for env in envelopes)


def test_a_merge_reaches_the_other_device_and_an_older_copy_does_not_undo_it(
    devices: tuple[Device, Device, bytes], tmp_path: Path, sqld: SqldServer
) -> None:
    a, b, key = devices
    a.mem.store("Zephyrine works on Quillmark since March 2026.", "projects", 0.6)
    a.mem.store("Zeph works on Quillmark.", "projects", 0.6)
    with a.mem.db.transaction():
        graphmod.index_memories(a.mem)
    keep, gone = a.graph().find("Zephyrine"), a.graph().find("Zeph")
    a.engine.push(policy())
    b.engine.pull(policy())
    assert b.graph().find("Zeph").id == gone.id

    with a.mem.db.transaction():
        a.graph().merge("Zephyrine", "Zeph", a.mem.now())
    a.engine.push(policy())
    # Meanwhile the phone, not yet aware of the merge, learns more about Zeph and pushes it.
    b.mem.store("Zeph moved to Lisbon in 2026-02.", "people", 0.6)
    with b.mem.db.transaction():
        graphmod.index_memories(b.mem)
    assert b.graph().find("Zeph").id == gone.id
    b.sync()
    a.engine.pull(policy())

    for mem in (a.mem, b.mem):
        graph = graphmod.store_for(mem)
        assert graph.find("Zeph").id == keep.id  # an alias of the entity kept
        assert graph.entities(ids=[gone.id]) == []
        predicates = {e.predicate for e in graph.edges(keep.id)}
        assert {"works_on", "lives_in"} <= predicates, mem.home.root
        assert not mem.db.scalar(
            "SELECT count(*) FROM relations WHERE subject = ? OR object = ?", (gone.id, gone.id)
        )
    a.sync()
    b.sync()
    assert a.marks() == b.marks() == 0

    with restored(tmp_path, sqld, a.mem.agent_id, key) as tablet:
        graph = graphmod.store_for(tablet)
        assert graph.find("Zeph").id == keep.id
        assert graph.entities(ids=[gone.id]) == []
        with pytest.raises(NotFound):
            graph.find(gone.id)


def test_graph_records_check_clean_and_a_moved_one_is_refused(
    devices: tuple[Device, Device, bytes],
    tmp_path: Path,
    sqld: SqldServer,
    client: HranaClient,
) -> None:
    a, b, key = devices
    report = a.mem.conversation_end(parse(TRANSCRIPT), TRANSCRIPT)
    assert report.episode is not None
    a.engine.push(policy())
    for read_data in (False, True):
        checked = check(a.engine, read_data=read_data, policy=policy())
        assert checked.ok and checked.exit_code == 0, checked.problems
    # The server files the episode's record under an entity's record id.
    quill = a.graph().find("Quillmark")
    episode_rid = records.record_id(
        a.engine.id_key(), records.GRAPH_TABLE, f"episode:{report.episode.id}"
    )
    entity_rid = records.record_id(a.engine.id_key(), records.GRAPH_TABLE, f"entity:{quill.id}")
    client.execute("DELETE FROM records WHERE record_id = ?", (entity_rid,))
    client.execute(
        "UPDATE records SET record_id = ? WHERE record_id = ?", (entity_rid, episode_rid)
    )
    pulled = b.engine.pull(policy())
    assert pulled.rejected == 1
    with pytest.raises(NotFound):
        episodes.get(b.mem.db, b.mem.agent_id, report.episode.id)
    assert check(a.engine, read_data=True, policy=policy()).exit_code in DAMAGE_EXIT_CODES.values()
    with pytest.raises(RecordDeleted):  # the manifest lists the episode's id, now empty
        restored(tmp_path, sqld, a.mem.agent_id, key)


def test_an_expired_episode_pruned_on_one_device_goes_on_the_other(
    devices: tuple[Device, Device, bytes], tmp_path: Path, sqld: SqldServer
) -> None:
    a, b, key = devices
    report = a.mem.conversation_end(parse(TRANSCRIPT), TRANSCRIPT)
    assert report.episode is not None
    a.sync()
    b.sync()
    assert episodes.get(b.mem.db, b.mem.agent_id, report.episode.id)
    with a.mem.db.transaction():
        later = report.episode.expires_at + 1
        assert episodes.prune(a.mem.db, a.mem.agent_id, later) == [report.episode.id]
    a.sync()
    b.engine.pull(policy())
    with pytest.raises(NotFound):
        episodes.get(b.mem.db, b.mem.agent_id, report.episode.id)
    assert b.graph().find("Quillmark")  # the graph stays
    with restored(tmp_path, sqld, a.mem.agent_id, key) as tablet:
        assert episodes.count(tablet.db, tablet.agent_id) == 0


def test_episodes_from_before_sync_was_set_up_are_sent_by_the_first_push(
    tmp_path: Path, sqld: SqldServer, agent_id: str
) -> None:
    mem = Memory(tmp_path / "desktop", agent_id)
    try:
        episode = mem.conversation_end(parse(TRANSCRIPT), TRANSCRIPT).episode
        assert episode is not None
        assert mem.db.scalar("SELECT count(*) FROM graph_dirty") == 0  # nothing tracked yet
        engine, key = init_engine(mem, sqld.url, sqld.token)
        try:
            assert Device(mem, engine).marks() >= 3  # set-up marked the episode and entities
            engine.push(policy())
            assert Device(mem, engine).marks() == 0
        finally:
            engine.close()
    finally:
        mem.close()
    with restored(tmp_path, sqld, agent_id, key) as tablet:
        assert episodes.get(tablet.db, tablet.agent_id, episode.id).summary == episode.summary
