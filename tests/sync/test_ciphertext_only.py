"""The server sees only ciphertext: after a push, sqld's files hold no text, category, key or
token the client used (and a positive control proves the scan finds plaintext when it is there)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sync.helpers import CHEAP_KDF, policy
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.vault.hrana import HranaClient

AGENT = "agent-wombat-5512"
PASSPHRASE = "quince walrus trombone ember"
TEXTS = {
    "identity key": "favourite_snack_9931",
    "identity value": "pistachio-gelato-4417",
    "owner profile": "lives-in-reykjavik-2208",
    "lesson": "never deploy on friday-5127",
    "lesson category": "ops/deploy-xylophone",
    "event": "met the auditors-8865",
    "task": "file the zanzibar report",
    "project": "Project Narwhal-3390",
    "project description": "underwater routing-6602",
    "tree path": "clients/acme-falcon",
    "tree description": "the falcon account-7745",
}


def scan(root: Path, needles: dict[str, bytes]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{name} in {path.name}" for name, n in needles.items() if n in data]
    return found


@pytest.fixture
def server(tmp_path: Path, sqld: SqldServer) -> Iterator[SqldServer]:
    """A sqld of its own (the binary check comes with the session fixture)."""
    server = SqldServer(tmp_path / "sqld")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_server_files_hold_no_plaintext_key_or_token(tmp_path: Path, server: SqldServer) -> None:
    with Memory(tmp_path / "home", AGENT) as mem:
        mem.update_hot("identity", {TEXTS["identity key"]: TEXTS["identity value"]})
        mem.update_hot("owner_profile", {"home": TEXTS["owner profile"]})
        mem.add_lesson(TEXTS["lesson"], 0.9, TEXTS["lesson category"])
        mem.add_event(TEXTS["event"])
        mem.add_task(TEXTS["task"])
        mem.add_project(TEXTS["project"], TEXTS["project description"], "active")
        mem.tree_add(TEXTS["tree path"], TEXTS["tree description"])
        key = crypto.generate_recovery_key()
        with SyncEngine(mem) as engine:
            engine.init(
                server.url,
                server.token,
                key,
                passphrase=PASSPHRASE,
                kdf=CHEAP_KDF,
                policy=policy(),
            )
            assert engine.push(policy()).pushed
            s = engine.settings()
            assert s is not None
            vault_key = engine.vault_key(s)
            device_key = engine.device_key(s).private_bytes_raw()
    restore(tmp_path / "restored", AGENT, server.url, server.token, recovery_key=key)
    secrets = {
        "token": server.token.encode(),
        "token signature": server.token.rsplit(".", 1)[1].encode(),
        "recovery key": key,
        "recovery key (hex)": key.hex().encode(),
        "recovery key (typed)": crypto.format_recovery_key(key).encode(),
        "recovery key (base64)": base64.b64encode(key).rstrip(b"="),
        "vault key": vault_key,
        "vault key (hex)": vault_key.hex().encode(),
        "device key": device_key,
        "device key (hex)": device_key.hex().encode(),
        "passphrase": PASSPHRASE.encode(),
        "agent id": AGENT.encode(),
    }
    needles = {name: text.encode() for name, text in TEXTS.items()} | secrets
    assert scan(server.workdir, needles) == []
    # Positive control: the same scan finds plaintext that really was sent.
    with HranaClient(server.url, server.token) as raw:
        raw.execute("CREATE TABLE control (x TEXT)")
        raw.execute("INSERT INTO control VALUES (?)", (TEXTS["lesson"],))
    assert any(hit.startswith("lesson in") for hit in scan(server.workdir, needles))
