"""A hostile server: the attacker holds the shared token of a real sqld and edits the rows
(injects, deletes, flips bits, repairs). Every attack is detected with its own exit code, and
no local memory is lost or changed; plus the transport and file-mode rules."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import run_cli
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import hlc, records
from tiermem.sync.devices import epochs
from tiermem.sync.engine import SyncEngine
from tiermem.sync.vault.hrana import HranaClient
from tiermem.tui.cli import run

MAX_VERSION = "999999999999999999.999999."


class Tm:
    """`tiermem` in-process, for one agent, in any home."""

    def __init__(self, capsys: pytest.CaptureFixture[str], agent_id: str) -> None:
        self.capsys = capsys
        self.agent_id = agent_id

    def __call__(self, home: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        return run_cli(
            self.capsys, "--home", str(home), "--agent-id", self.agent_id, *args, stdin=stdin
        )

    def json(self, home: Path, *args: str, **kw: Any) -> dict[str, Any]:
        code, out, err = self(home, "--json", *args, **kw)
        assert code == 0, err
        doc: dict[str, Any] = json.loads(out)
        return doc

    def store(self, home: Path, text: str) -> str:
        return str(self.json(home, "store", "--text", text, "--category", "ops")["id"])


@pytest.fixture
def tm(
    capsys: pytest.CaptureFixture[str],
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Tm:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    return Tm(capsys, agent_id)


class Attacker:
    """Holds the token every device holds and edits the agent's rows directly."""

    def __init__(self, client: HranaClient) -> None:
        self.c = client

    @property
    def tag(self) -> bytes:
        """The newest vault's tag: keyed, so picked by when it appeared, not by agent id."""
        rows = self.c.execute(
            "SELECT agent_tag FROM key_wraps WHERE kind = 'recovery' ORDER BY rowid DESC LIMIT 1"
        ).rows
        return records.server_blob(rows[0][0])

    def rows(self, rid: bytes) -> list[tuple[str, bytes]]:
        """(version, envelope) of every version of a record, oldest first."""
        result = self.c.execute(
            "SELECT version, envelope FROM records WHERE agent_tag = ? AND record_id = ? "
            "ORDER BY version",
            (self.tag, rid),
        )
        return [(str(v), bytes(e)) for v, e in result.rows if isinstance(e, bytes)]

    def delete(self, rid: bytes, version: str | None = None) -> None:
        if version is None:
            self.c.execute(
                "DELETE FROM records WHERE agent_tag = ? AND record_id = ?", (self.tag, rid)
            )
        else:
            self.c.execute(
                "DELETE FROM records WHERE agent_tag = ? AND record_id = ? AND version = ?",
                (self.tag, rid, version),
            )

    def delete_push(self, device: bytes, version: str) -> None:
        """Every row of one push request (they share its version)."""
        self.c.execute(
            "DELETE FROM records WHERE agent_tag = ? AND device_id = ? AND version = ?",
            (self.tag, device, version),
        )

    def replace(self, rid: bytes, version: str, envelope: bytes) -> None:
        """Delete and insert again (a new seq, as a repair from a backup would)."""
        row = self.c.execute(
            "SELECT epoch, device_id FROM records WHERE agent_tag = ? AND record_id = ? "
            "AND version = ?",
            (self.tag, rid, version),
        ).rows[0]
        self.delete(rid, version)
        self.c.execute(
            "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, envelope) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (self.tag, rid, version, row[0], row[1], envelope),
        )


@pytest.fixture
def attacker(client: HranaClient) -> Attacker:
    return Attacker(client)


def init(tm: Tm, home: Path, sqld: SqldServer) -> str:
    """Set up sync in `home` (first push included); the recovery key."""
    return str(tm.json(home, "sync", "init", "--url", sqld.url, "--new-vault")["recovery_key"])


def restore(tm: Tm, home: Path, sqld: SqldServer, key: str, *extra: str) -> tuple[int, str, str]:
    return tm(home, "restore", "--url", sqld.url, "--stdin", *extra, stdin=key + "\n")


def memories(home: Path, agent_id: str) -> dict[str, tuple[str, str]]:
    """id → (text, tier) of every memory of the agent in `home`."""
    if not (home / "tiermem.db").is_file():
        return {}
    with Memory(home, agent_id) as mem:
        return {
            str(r[0]): (str(r[1]), str(r[2]))
            for r in mem.db.query(
                "SELECT id, text, tier FROM memories WHERE agent_id = ?", (agent_id,)
            )
        }


def record_id(home: Path, agent_id: str, table: str, key: str) -> bytes:
    with Memory(home, agent_id) as mem, SyncEngine(mem) as engine:
        return records.record_id(epochs.id_key(engine), table, key)


def status(tm: Tm, home: Path) -> dict[str, Any]:
    return tm.json(home, "sync", "status")


@pytest.fixture
def homes(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    yield tmp_path / "a", tmp_path / "b", tmp_path / "fresh"


# ------------------------------------------------------------------------- the clock


def test_a_row_filed_under_this_device_with_a_maximal_version_does_not_stop_push(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, b, _ = homes
    tm.store(a, "the pump in hall 3 is red")
    key = init(tm, a, sqld)
    assert restore(tm, b, sqld, key)[0] == 0
    device = bytes.fromhex(status(tm, a)["device_id"])
    critical = record_id(a, tm.agent_id, records.CRITICAL_TABLE, tm.agent_id)
    (_, envelope), *_ = attacker.rows(critical)
    attacker.c.execute(
        "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, envelope) "
        "VALUES (?, ?, ?, 1, ?, ?)",
        (attacker.tag, critical, MAX_VERSION + device.hex(), device, envelope),
    )
    before = memories(a, tm.agent_id)
    assert tm(a, "sync", "pull")[0] == 0  # its own rows are never read, so never trusted
    tm.store(a, "the valve in hall 4 is green")
    code, _, err = tm(a, "sync", "push")
    assert code == 0, err
    assert status(tm, a)["clock_ahead"] is None
    code, out, _ = tm(a, "doctor")
    assert "not ahead of the wall clock" in out
    assert set(before) < set(memories(a, tm.agent_id))
    # On another device the row fails authentication: rejected, and the clock stays put.
    code, _, err = tm(b, "sync", "pull")
    assert code == 48 and "failed authentication" in err
    clock = hlc.parse(status(tm, b)["last_push_version"] or "0" * 18 + ".000000." + "0" * 32)
    assert clock.wall_ms < 10**15 and status(tm, b)["clock_ahead"] is None


def test_a_clock_poisoned_earlier_is_found_by_doctor_and_set_back_by_the_next_push(
    tm: Tm, sqld: SqldServer, homes: tuple[Path, Path, Path]
) -> None:
    a, _, _ = homes
    tm.store(a, "the pump in hall 3 is red")
    init(tm, a, sqld)
    device = status(tm, a)["device_id"]
    with Memory(a, tm.agent_id) as mem, mem.db.transaction():
        mem.db.execute("UPDATE sync_state SET hlc = ?", (MAX_VERSION + device,))
    code, out, _ = tm(a, "doctor")
    assert code == 1 and "ahead of this machine's clock" in out
    assert status(tm, a)["clock_ahead"] == MAX_VERSION + device
    before = memories(a, tm.agent_id)
    tm.store(a, "the valve in hall 4 is green")
    code, _, err = tm(a, "sync", "push")
    assert code == 0, err
    assert status(tm, a)["clock_ahead"] is None
    assert "not ahead of the wall clock" in tm(a, "doctor")[1]
    assert set(before) < set(memories(a, tm.agent_id))


# ------------------------------------------------------------------------ restore


def test_a_dropped_push_that_another_device_saw_stops_restore_with_45(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, b, fresh = homes
    tm.store(a, "the pump in hall 3 is red")
    key = init(tm, a, sqld)
    assert restore(tm, b, sqld, key)[0] == 0
    tm.store(a, "the valve in hall 4 is green")
    dropped = tm.json(a, "sync", "push")["version"]
    assert tm(b, "sync", "pull")[0] == 0  # b applies a's second push …
    tm.store(b, "the fan in hall 5 hums")
    assert tm(b, "sync", "push")[0] == 0  # … and its own push says so
    local_a, local_b = memories(a, tm.agent_id), memories(b, tm.agent_id)
    attacker.delete_push(bytes.fromhex(status(tm, a)["device_id"]), dropped)
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 45 and "push 2 of device" in err and "nothing was restored" in err
    assert memories(fresh, tm.agent_id) == {}
    code, out, err = restore(tm, fresh, sqld, key, "--salvage")
    assert code == 0, err
    assert "rollback" in out and len(memories(fresh, tm.agent_id)) == 2
    assert tm(b, "sync", "pull")[0] == 0
    assert memories(a, tm.agent_id) == local_a and memories(b, tm.agent_id) == local_b


def test_a_deleted_record_stops_restore_with_46_and_salvage_takes_the_rest(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, _, fresh = homes
    ids = [tm.store(a, f"fact number {n} about the pumps") for n in range(3)]
    key = init(tm, a, sqld)
    local = memories(a, tm.agent_id)
    attacker.delete(record_id(a, tm.agent_id, records.MEMORY_TABLE, ids[1]))
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 46 and "is gone from the server" in err
    # each memory that checked whole on its own is searchable; the deleted one is missing
    assert memories(fresh, tm.agent_id) == {k: v for k, v in local.items() if k != ids[1]}
    doc = tm.json(fresh, "restore", "--url", sqld.url, "--stdin", "--salvage", stdin=key)
    assert [p["kind"] for p in doc["problems"]] == ["deletion"]
    assert set(memories(fresh, tm.agent_id)) == {ids[0], ids[2]}
    assert tm(a, "sync", "pull")[0] == 0 and memories(a, tm.agent_id) == local


def test_a_rolled_back_record_stops_restore_with_47(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, _, fresh = homes
    mid = tm.store(a, "the old door code is 4711")
    key = init(tm, a, sqld)
    assert tm(a, "forget", mid)[0] == 0  # archived: a newer version of the record
    assert tm(a, "sync", "push")[0] == 0
    local = memories(a, tm.agent_id)
    rid = record_id(a, tm.agent_id, records.MEMORY_TABLE, mid)
    newest, _ = attacker.rows(rid)[-1]
    attacker.delete(rid, newest)
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 47 and "older than the listed" in err
    assert memories(fresh, tm.agent_id) == {}
    assert tm(a, "sync", "pull")[0] == 0 and memories(a, tm.agent_id) == local


def test_a_replayed_snapshot_stops_restore_with_47(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, _, fresh = homes
    assert tm(a, "hot", "--add-lesson", "check the gauges twice")[0] == 0
    key = init(tm, a, sqld)
    assert tm(a, "hot", "--add-lesson", "never restart pump 2 under load")[0] == 0
    assert tm(a, "sync", "push")[0] == 0
    rid = record_id(a, tm.agent_id, records.CRITICAL_TABLE, tm.agent_id)
    newest, _ = attacker.rows(rid)[-1]
    attacker.delete(rid, newest)
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 47 and "served at version" in err
    assert memories(fresh, tm.agent_id) == {} and not list(fresh.glob("MEMORY*.md"))
    code, out, _ = restore(tm, fresh, sqld, key, "--salvage")
    assert code == 0 and "replay" in out
    hot = tm(fresh, "hot")[1]  # the older snapshot, the newer one listed as replayed
    assert "check the gauges twice" in hot and "never restart pump 2" not in hot
    assert "never restart pump 2" in tm(a, "hot")[1]


# ------------------------------------------------------------------ rejected rows


def test_a_tampered_row_is_fetched_again_until_the_server_repairs_it(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, b, fresh = homes
    tm.store(a, "the pump in hall 3 is red")
    key = init(tm, a, sqld)
    assert restore(tm, b, sqld, key)[0] == 0
    mid = tm.store(a, "the access count of this fact matters")
    assert tm(a, "sync", "push")[0] == 0
    rid = record_id(a, tm.agent_id, records.MEMORY_TABLE, mid)
    ((version, envelope),) = attacker.rows(rid)
    flipped = envelope[:100] + bytes([envelope[100] ^ 1]) + envelope[101:]
    attacker.replace(rid, version, flipped)
    local_b = memories(b, tm.agent_id)
    for _ in range(2):  # the cursor moves past it; the retry list does not
        code, _, err = tm(b, "sync", "pull")
        assert code == 48 and "fetches them again" in err
        assert memories(b, tm.agent_id) == local_b
    assert [r["record_id"] for r in status(tm, b)["rejected"]] == [rid.hex()]
    code, out, _ = tm(b, "doctor")
    assert code == 1 and "failed authentication" in out
    assert tm(a, "sync", "check")[0] == 40  # caught without --read-data
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 14 and "--salvage" in err and memories(fresh, tm.agent_id) == {}
    doc = tm.json(fresh, "restore", "--url", sqld.url, "--stdin", "--salvage", stdin=key)
    assert [p["kind"] for p in doc["problems"]] == ["damaged"]
    assert mid not in memories(fresh, tm.agent_id) and len(memories(fresh, tm.agent_id)) == 1
    attacker.replace(rid, version, envelope)  # repaired (a new seq)
    code, out, err = tm(b, "sync", "pull")
    assert code == 0, err
    assert "now authenticate" in out and status(tm, b)["rejected"] == []
    assert memories(b, tm.agent_id)[mid][0] == "the access count of this fact matters"
    assert (
        tm(b, "doctor")[0] in (0, 1) and "every pulled record authenticated" in tm(b, "doctor")[1]
    )


# ----------------------------------------------------------------- transport, files


def test_plain_http_to_another_host_is_refused_unless_insecure_http_which_is_remembered(
    tm: Tm, sqld: SqldServer, homes: tuple[Path, Path, Path]
) -> None:
    a, b, fresh = homes
    remote = "http://db.example.com:8080"
    for args in (
        ("sync", "init", "--url", remote),
        ("restore", "--url", remote, "--stdin"),
        ("sync", "add-device", "--recovery", "--url", remote, "--stdin"),
    ):
        code, _, err = tm(fresh, *args, stdin="x\n")
        assert code == 49 and "--insecure-http" in err and err.count("\n") == 1, args
    assert not (fresh / "tiermem.db").exists() or memories(fresh, tm.agent_id) == {}
    # Remembered: a home set up with --insecure-http keeps accepting its http:// URL.
    doc = tm.json(a, "sync", "init", "--url", sqld.url, "--insecure-http", "--new-vault")
    assert restore(tm, b, sqld, doc["recovery_key"])[0] == 0  # without the flag
    for home in (a, b):
        with Memory(home, tm.agent_id) as mem, mem.db.transaction():
            mem.db.execute("UPDATE sync_state SET url = ?", ("http://tiermem.invalid:9",))
        tm.store(home, "a change to push")
    assert tm(a, "sync", "push", "--attempts", "1")[0] == 20  # tried: refused by DNS only
    code, _, err = tm(b, "sync", "push", "--attempts", "1")
    assert code == 49 and "in clear" in err


def test_new_homes_are_0700_and_databases_0600(tm: Tm, tmp_path: Path) -> None:
    fresh, shared = tmp_path / "new", tmp_path / "shared"
    shared.mkdir(mode=0o755)
    for home in (fresh, shared):
        tm.store(home, "the pump in hall 3 is red")
        assert stat.S_IMODE((home / "tiermem.db").stat().st_mode) == 0o600
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700


# ------------------------------------------------------------------------- messages


def test_the_auth_token_in_a_turso_url_is_used(
    tm: Tm, sqld: SqldServer, homes: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, _ = homes
    monkeypatch.delenv("TIERMEM_SYNC_TOKEN")
    port = sqld.url.rsplit(":", 1)[1]
    url = f"libsql://127.0.0.1:{port}?tls=0&authToken={sqld.token}"
    doc = tm.json(a, "sync", "init", "--url", url, "--new-vault")
    assert doc["token_stored"] and doc["pushed"]["pushed"]
    assert doc["url"] == sqld.url and sqld.token not in json.dumps(doc)
    tm.store(a, "the pump in hall 3 is red")
    assert tm(a, "sync", "push")[0] == 0


def test_a_failed_push_counts_the_memories_that_stay_queued(
    tm: Tm, sqld: SqldServer, homes: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, _ = homes
    init(tm, a, sqld)
    tm.store(a, "the pump in hall 3 is red")
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", "expired-token")
    code, _, err = tm(a, "sync", "push", "--attempts", "1")
    assert code == 21 and "critical change(s) and 1 changed memory record(s) stay queued" in err


def test_a_restore_with_a_bad_token_says_to_give_a_valid_one(
    tm: Tm, sqld: SqldServer, homes: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, fresh = homes
    key = init(tm, a, sqld)
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", "expired-token")
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 21 and "give a valid token" in err and "same command" not in err


def test_the_daemon_unit_is_not_restarted_after_a_removal_or_a_refused_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "user" / ".config"))
    code = run(
        [
            "--home",
            str(tmp_path / "h"),
            "--json",
            "service",
            "install",
            "--print",
            "--daemon",
            "--platform",
            "systemd",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    units = {f["unit"]: f["content"] for f in json.loads(out)["files"]}
    (line,) = [
        x for x in units["tiermem-daemon.service"].splitlines() if x.startswith("RestartPrevent")
    ]
    assert set(line.split("=")[1].split()) == {"22", "26", "27", "49", "54"}
    recipe = (Path(__file__).parents[2] / "packaging" / "termux" / "README.md").read_text()
    assert "case $code in 22|26|27|49|54) sv down . ;; esac" in recipe


def test_push_and_pull_refresh_last_seen_in_the_device_list(
    tm: Tm, sqld: SqldServer, homes: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = homes
    key = init(tm, a, sqld)
    assert restore(tm, b, sqld, key)[0] == 0
    tm.store(b, "the pump in hall 3 is red")
    assert tm(b, "sync", "push")[0] == 0
    b_id = status(tm, b)["device_id"]

    def seen_from_a() -> float:
        (entry,) = [d for d in tm.json(a, "sync", "devices")["devices"] if d["device_id"] == b_id]
        return float(entry["last_seen"])

    pushed = seen_from_a()
    assert pushed > 0
    later = Memory.now  # b's clock moves on by an hour before it pulls
    monkeypatch.setattr(Memory, "now", lambda self: later(self) + 3600)
    assert tm(b, "sync", "pull")[0] == 0
    monkeypatch.setattr(Memory, "now", later)
    assert seen_from_a() >= pushed + 3600


def test_daily_metrics_are_synced_summed_per_device_and_survive_a_restore(
    tm: Tm, sqld: SqldServer, homes: tuple[Path, Path, Path]
) -> None:
    a, b, fresh = homes
    tm.store(a, "the pump in hall 3 is red")
    key = init(tm, a, sqld)
    assert restore(tm, b, sqld, key)[0] == 0
    for home, n in ((a, 2), (b, 3)):
        for _ in range(n):
            assert tm(home, "retrieve", "pump")[0] == 0
        tm.store(home, f"a fact stored on {home.name}")
        assert tm(home, "sync", "push")[0] == 0
    for _ in range(2):  # pulled twice: each device's share counts once
        assert tm(a, "sync", "pull")[0] == 0
        assert tm(b, "sync", "pull")[0] == 0

    def today(home: Path) -> dict[str, int]:
        return dict(tm.json(home, "metrics", "--days", "1")["today"])

    assert today(a)["retrievals"] == today(b)["retrievals"] == 5
    assert today(a)["stores"] == today(b)["stores"] == 3
    assert restore(tm, fresh, sqld, key)[0] == 0
    restored = today(fresh)
    assert restored["retrievals"] == 5 and restored["stores"] == 3


def test_two_devices_named_after_the_same_host_are_told_apart(
    tm: Tm, sqld: SqldServer, homes: tuple[Path, Path, Path]
) -> None:
    a, b, _ = homes
    key = init(tm, a, sqld)
    assert restore(tm, b, sqld, key)[0] == 0
    tm.store(b, "the pump in hall 3 is red")
    assert tm(b, "sync", "push")[0] == 0
    found = tm.json(a, "sync", "devices")["devices"]
    names = [d["name"] for d in found]
    assert len(names) == 2 and len(set(names)) == 2
    for d in found:
        assert d["name"].endswith("#" + d["device_id"][:4])
