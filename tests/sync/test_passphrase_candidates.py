"""A passphrase restore facing many candidate vaults on one server (the server operator adds
passphrase wraps of its own, cheap or as costly as a wrap may claim): it opens the right
vault, and the key derivation work it spends stays bounded, whatever the server offers.
Through the CLI, on a sqld of its own with JWT auth (so no other test's vaults are
candidates)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.clikit import run_cli
from tests.sync.sqld import SqldServer
from tiermem.core.errors import WrongPassphrase
from tiermem.sync import crypto
from tiermem.sync.crypto import wraps
from tiermem.sync.devices import find_vault
from tiermem.sync.vault.hrana import HranaClient

PASSPHRASE = "correct horse battery staple"
COSTLY = crypto.KdfParameters(memory_kib=1024 * 1024, iterations=10, lanes=4)
"""The most a wrap may claim (1 GiB, 10 passes): 53 runs at tiermem's own cost."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqldServer]:
    own = SqldServer(tmp_path_factory.mktemp("sqld-candidates"))
    own.start()
    try:
        yield own
    finally:
        own.stop()


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[crypto.KdfParameters]:
    """Every Argon2id run the code makes, with its parameters (the run itself happens)."""
    runs: list[crypto.KdfParameters] = []
    real: Callable[[str, bytes, crypto.KdfParameters], bytes] = wraps._passphrase_key

    def counted(passphrase: str, salt: bytes, params: crypto.KdfParameters) -> bytes:
        runs.append(params)
        return real(passphrase, salt, params)

    monkeypatch.setattr(wraps, "_passphrase_key", counted)
    return runs


def _vault_with_passphrase(
    capsys: pytest.CaptureFixture[str], home: Path, agent_id: str, server: SqldServer
) -> None:
    code, _, err = run_cli(
        capsys, "--home", str(home), "--agent-id", agent_id, "--json", "sync", "init",
        "--url", server.url, "--new-vault", "--passphrase",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run_cli(
        capsys, "--home", str(home), "--agent-id", agent_id, "store", "--text",
        "the spare key is under the blue pot",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run_cli(capsys, "--home", str(home), "--agent-id", agent_id, "sync", "now")
    assert code == 0, err


def _fake_wrap(params: crypto.KdfParameters) -> bytes:
    """A well-formed passphrase wrap of another vault, made cheaply, then edited (as the
    operator may) to claim `params`: opening it costs a run at that cost, then fails."""
    context = crypto.WrapContext("someone-else", 1, os.urandom(16))
    cheap = crypto.KdfParameters(memory_kib=8 * 1024, iterations=1, lanes=1)
    blob = wraps.wrap_with_passphrase(os.urandom(32), "not yours", context, params=cheap)
    parsed = crypto.parse_wrap(blob)
    assert isinstance(parsed, wraps.PassphraseWrap)
    return dataclasses.replace(parsed, params=params).to_bytes()


def _plant(server: SqldServer, count: int, params: crypto.KdfParameters) -> None:
    """The operator files `count` vaults with a passphrase wrap (and a recovery wrap, so a
    restore would take them), newer than the real one. Their wraps open with no passphrase."""
    with HranaClient(server.url, server.token, timeout=10.0) as client:
        for _ in range(count):
            tag = os.urandom(32)
            for kind, blob in (("recovery", os.urandom(80)), ("passphrase", _fake_wrap(params))):
                client.execute(
                    "INSERT INTO key_wraps (wrap_id, agent_tag, epoch, kind, blob) "
                    "VALUES (?, ?, 1, ?, ?)",
                    (os.urandom(16), tag, kind, blob),
                )


def _restore(
    capsys: pytest.CaptureFixture[str], home: Path, agent_id: str, server: SqldServer
) -> tuple[int, str]:
    code, out, err = run_cli(
        capsys, "--home", str(home), "--agent-id", agent_id, "--json", "restore", "--url",
        server.url, "--passphrase", "--stdin", stdin=PASSPHRASE + "\n",
    )  # fmt: skip
    return code, out + err


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, server: SqldServer) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", server.token)
    monkeypatch.setenv("TIERMEM_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "file")


@pytest.mark.usefixtures("env")
def test_cheap_candidates_ahead_of_the_vault_are_each_tried_once_then_it_opens(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    agent_id: str,
    server: SqldServer,
    derivations: list[crypto.KdfParameters],
) -> None:
    _vault_with_passphrase(capsys, tmp_path / "desk", agent_id, server)
    _plant(server, find_vault.MAX_CANDIDATES - 4, crypto.DEFAULT_KDF_PARAMS)
    derivations.clear()
    code, out = _restore(capsys, tmp_path / "new", agent_id, server)
    assert code == 0, out
    assert json.loads(out.splitlines()[0])["unlocked_with"] == "passphrase"
    assert 1 <= len(derivations) <= find_vault.MAX_CANDIDATES


@pytest.mark.usefixtures("env")
def test_candidates_claiming_a_huge_cost_are_passed_over_unopened(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    agent_id: str,
    server: SqldServer,
    derivations: list[crypto.KdfParameters],
) -> None:
    _vault_with_passphrase(capsys, tmp_path / "desk", agent_id, server)
    _plant(server, 6, COSTLY)
    derivations.clear()
    code, out = _restore(capsys, tmp_path / "new", agent_id, server)
    assert code == 0, out
    assert COSTLY not in derivations  # not one gigabyte-sized run
    spent = sum(find_vault.kdf_cost(p) for p in derivations)
    assert spent <= find_vault.WORK_BUDGET


@pytest.mark.usefixtures("env")
def test_a_flood_of_candidates_ends_in_a_clear_error_within_the_budget(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    agent_id: str,
    server: SqldServer,
    derivations: list[crypto.KdfParameters],
) -> None:
    _vault_with_passphrase(capsys, tmp_path / "desk", agent_id, server)
    _plant(server, 3 * find_vault.MAX_CANDIDATES, crypto.DEFAULT_KDF_PARAMS)
    derivations.clear()
    code, out = _restore(capsys, tmp_path / "new", agent_id, server)
    assert code == WrongPassphrase.exit_code
    assert "use the recovery key" in out and "Traceback" not in out
    assert len(derivations) <= find_vault.MAX_CANDIDATES
    code, _, _ = run_cli(capsys, "--home", str(tmp_path / "new"), "--agent-id", agent_id, "--json",
                         "retrieve", "spare key")  # fmt: skip
    assert code != 0  # no agent was restored
