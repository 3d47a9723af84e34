"""`tiermem doctor`, local checks on real homes: healthy, corrupted database, wrong permissions,
bad config, a newer schema. (The sync checks against a real sqld: tests/sync/test_doctor.py.)"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from tiermem.core.config import Config, DedupConfig
from tiermem.core.engine import Memory
from tiermem.core.migrations import MIGRATIONS
from tiermem.ops.doctor import FAIL, OK, WARN, local_checks
from tiermem.tui.cli import run


@pytest.fixture
def home(tmp_path: Path, driver: str) -> Path:
    root = tmp_path / "home"
    fast = Config(dedup=DedupConfig(near=False))  # exact dedup only: a quick fixture
    with Memory(root, "default", driver=driver, config=fast) as mem:
        for i in range(200):
            mem.store(
                f"fact number {i} about the staging database and deploys", "technical/db", 0.5
            )
    return root


def doctor(capsys, home: Path) -> tuple[int, dict[str, Any]]:
    code = run(["--home", str(home), "--json", "doctor"])
    out, err = capsys.readouterr()
    assert err == "" and out.count("\n") == 1
    return code, json.loads(out)


def verdicts(doc: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["verdict"] for c in doc["checks"]}


def test_healthy_home(capsys, home: Path) -> None:
    code, doc = doctor(capsys, home)
    assert code == 0 and doc["ok"] and doc["failures"] == 0
    v = verdicts(doc)
    assert v["home"] == v["permissions"] == v["config"] == v["integrity"] == v["schema"] == OK
    assert v["keyring"] == OK  # the file store, forced
    assert v["sync"] == WARN  # not set up
    assert "1 agent(s): default" in next(
        c["detail"] for c in doc["checks"] if c["name"] == "integrity"
    )


def test_text_output_one_verdict_line_each(capsys, home: Path) -> None:
    assert run(["--home", str(home), "doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["ok"] * 7 + ["warn"]
    assert lines[-1] == "healthy: 0 failure(s), 1 warning(s)"


def test_missing_home_is_not_found_and_is_not_created(capsys, tmp_path: Path) -> None:
    code = run(["--home", str(tmp_path / "nowhere"), "--json", "doctor"])
    out, err = capsys.readouterr()
    assert code == 4 and json.loads(out)["exit_code"] == 4 and "no memory home at" in err
    assert not (tmp_path / "nowhere").exists()


def _checkpoint(db_path: Path) -> None:
    con = sqlite3.connect(db_path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def test_corrupted_database(capsys, home: Path) -> None:
    db = home / "tiermem.db"
    _checkpoint(db)
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    for offset in range(3 * page + 200, len(data) - page, 2 * page):  # scribble inside pages
        data[offset : offset + 64] = bytes(range(64))
    db.write_bytes(bytes(data))
    code, doc = doctor(capsys, home)
    assert code == 1 and not doc["ok"]
    failed = [c for c in doc["checks"] if c["verdict"] == FAIL]
    assert [c["name"] for c in failed] in (["integrity"], ["database"])
    assert "tiermem restore" in failed[0]["detail"]


def test_index_out_of_step_with_its_table(capsys, home: Path) -> None:
    """Damage integrity_check itself reports (the file still opens): an index whose definition
    no longer matches its entries."""
    con = sqlite3.connect(home / "tiermem.db")
    con.execute("PRAGMA writable_schema = ON")
    con.execute(
        "UPDATE sqlite_master SET sql = replace(sql, '(agent_id, tier, category)', "
        "'(agent_id, category, tier)') WHERE name = 'memories_tier'"
    )
    con.commit()
    con.close()
    code, doc = doctor(capsys, home)
    assert code == 1
    failed = {c["name"]: c["detail"] for c in doc["checks"] if c["verdict"] == FAIL}
    assert list(failed) == ["integrity"]
    assert "memories_tier" in failed["integrity"] and "tiermem restore" in failed["integrity"]


def test_not_a_database(capsys, home: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (home / f"tiermem.db{suffix}").unlink(missing_ok=True)
    (home / "tiermem.db").write_bytes(b"this is not a database at all" * 200)
    code, doc = doctor(capsys, home)
    assert code == 1
    assert {c["name"] for c in doc["checks"] if c["verdict"] == FAIL} <= {"integrity", "database"}


def test_wrong_permissions(capsys, home: Path) -> None:
    secrets = home / "secrets"
    secrets.mkdir(mode=0o700)
    secret = secrets / "abc.json"
    secret.write_text("{}")
    secret.chmod(0o644)
    home.chmod(0o755)
    code, doc = doctor(capsys, home)
    assert code == 1
    v = verdicts(doc)
    assert v["home"] == WARN and v["permissions"] == FAIL
    detail = next(c["detail"] for c in doc["checks"] if c["name"] == "permissions")
    assert f"chmod 600 {secret}" in detail

    secret.chmod(0o600)
    (home / "tiermem.db").chmod(0o444)
    code, doc = doctor(capsys, home)  # read-only is a warning: reads still work
    assert code == 0 and "tiermem.db read-only (mode 0444)" in json.dumps(doc)
    assert verdicts(doc)["permissions"] == WARN and "restore" not in json.dumps(doc)
    (home / "tiermem.db").chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_bad_config(capsys, home: Path) -> None:
    (home / "config.toml").write_text("[hot]\nmax_bytes = 'big'\n")
    code, doc = doctor(capsys, home)
    assert code == 1
    detail = next(c["detail"] for c in doc["checks"] if c["name"] == "config")
    assert "hot.max_bytes" in detail and str(home / "config.toml") in detail
    (home / "config.toml").write_text("[hot\n")
    code, doc = doctor(capsys, home)
    assert code == 1 and "invalid TOML" in json.dumps(doc)


def test_schema_versions(home: Path, driver: str) -> None:
    def schema(version: int) -> str:
        con = sqlite3.connect(home / "tiermem.db")
        con.execute(f"PRAGMA user_version = {version}")
        con.close()
        return next(c.verdict for c in local_checks(home, driver) if c.name == "schema")

    assert schema(len(MIGRATIONS)) == OK
    assert schema(len(MIGRATIONS) - 1) == WARN
    assert schema(len(MIGRATIONS) + 1) == FAIL


def test_owner_mismatch_reads_as_failure(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    checks = {c.name: c for c in local_checks(home)}
    assert checks["home"].verdict == FAIL and "not you (uid 4242)" in checks["home"].detail
