"""Pairing a new device with an existing one through a real sqld, checked by a short code:
a server that swaps either public key makes the codes differ and gets nothing; the code and
the sealed answer bind the whole transcript (Hypothesis)."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import sentinels
from tests.sync.devicekit import NoSleep, Terminal, first_device, pair, six_words, terminal_env
from tests.sync.helpers import policy
from tests.sync.helpers import settings as sync_settings
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.sync import crypto
from tiermem.sync.devices import epochs
from tiermem.sync.devices.membership import list_devices
from tiermem.sync.devices.pairing_approval import answer_pairing, codes_match, pending_pairings
from tiermem.sync.devices.pairing_exchange import PairingRefused, PairingTimeout, start_pairing
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import wrapcheck
from tiermem.sync.state import agent_tag
from tiermem.sync.vault.hrana import HranaClient


def test_two_homes_pair_and_both_read_and_write(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, _):
        mem_a.add_lesson("the heron feeder opens at dawn", 0.9, "farm/heron")
        mem_a.store("the barn door code changed in spring", "farm/barn")
        engine_a.push(policy())
        new_id = pair(tmp_path / "b", agent_id, sqld, engine_a, "tablet")
        assert client.execute(
            "SELECT count(*) FROM pairings WHERE agent_tag = ?", (agent_tag(agent_id),)
        ).rows == ((0,),)  # the finished pairing is cleaned up
        with Memory(tmp_path / "b", agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            s_b = sync_settings(engine_b)
            assert s_b.device_id.hex() == new_id and s_b.status == "ready"
            assert engine_b.id_key() == engine_a.id_key()
            assert wrapcheck.check_wraps(engine_b) == []
            engine_b.pull(policy())
            assert "the heron feeder opens at dawn" in [
                lesson.text for lesson in mem_b.hot().critical_lessons
            ]
            assert [h.memory.text for h in mem_b.retrieve("barn door code").hits][:1] == [
                "the barn door code changed in spring"
            ]
            mem_b.add_lesson("the tablet charges in the hayloft", 0.8, "farm/tablet")
            engine_b.push(policy())
        engine_a.pull(policy())
        assert "the tablet charges in the hayloft" in [
            lesson.text for lesson in mem_a.hot().critical_lessons
        ]
        listed = {d.device_id: d for d in list_devices(engine_a)}
        assert listed[new_id].name == "tablet" and listed[new_id].verified
        assert wrapcheck.check_wraps(engine_a) == []


def test_a_server_that_swaps_the_new_devices_key_gets_different_codes_and_nothing(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine_a, _):
        with Memory(tmp_path / "b", agent_id) as mem_b:
            pairing = start_pairing(mem_b, sqld.url, sqld.token, "b", sleep=NoSleep())
            try:
                # The server replaces the request with its own key and a commitment it can open.
                server_key = crypto.generate_device_key()
                server_public = crypto.device_public_bytes(server_key)
                server_nonce = os.urandom(crypto.PAIRING_NONCE_LEN)
                client.execute(
                    "UPDATE pairings SET new_public = ?, commitment = ? WHERE pairing_id = ?",
                    (
                        server_public,
                        crypto.pairing_commitment(server_public, server_nonce),
                        pairing.pairing_id,
                    ),
                )
                approval = answer_pairing(engine_a, sleep=NoSleep())
                code_new = pairing.wait_code()
                client.execute(  # ... and reveals its own nonce instead of the new device's
                    "UPDATE pairings SET new_nonce = ? WHERE pairing_id = ?",
                    (server_nonce, pairing.pairing_id),
                )
                code_existing = approval.wait_code()
                assert code_new != code_existing
                assert not codes_match(code_existing, code_new)
                with pytest.raises(PairingRefused) as err:
                    approval.approve(code_new)  # the user types what the new device shows
                assert err.value.exit_code == 56
                row = client.execute(
                    "SELECT bundle, refused FROM pairings WHERE pairing_id = ?",
                    (pairing.pairing_id,),
                ).rows
                assert row == ((None, 1),)  # nothing was sent
                with pytest.raises(PairingRefused):
                    pairing.finish()
            finally:
                pairing.close()
            assert SyncEngine(mem_b).settings() is None
        assert len(list_devices(engine_a)) == 1


def test_a_swapped_key_without_a_matching_commitment_is_refused_before_any_code(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with (
        first_device(tmp_path / "a", agent_id, sqld) as (_, engine_a, _),
        Memory(tmp_path / "b", agent_id) as mem_b,
    ):
        pairing = start_pairing(mem_b, sqld.url, sqld.token, "b", sleep=NoSleep())
        try:
            rogue = crypto.device_public_bytes(crypto.generate_device_key())
            client.execute(
                "UPDATE pairings SET new_public = ? WHERE pairing_id = ?",
                (rogue, pairing.pairing_id),
            )
            approval = answer_pairing(engine_a, sleep=NoSleep())
            pairing.wait_code()
            with pytest.raises(PairingRefused, match="committed"):
                approval.wait_code()
            with pytest.raises(PairingRefused):
                pairing.finish()
        finally:
            pairing.close()


def test_a_server_that_swaps_the_existing_devices_key_cannot_hand_out_a_vault(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with (
        first_device(tmp_path / "a", agent_id, sqld) as (_, engine_a, _),
        Memory(tmp_path / "b", agent_id) as mem_b,
    ):
        pairing = start_pairing(mem_b, sqld.url, sqld.token, "b", sleep=NoSleep())
        try:
            approval = answer_pairing(engine_a, sleep=NoSleep())
            rogue = crypto.device_public_bytes(crypto.generate_device_key())
            client.execute(
                "UPDATE pairings SET approver_public = ? WHERE pairing_id = ?",
                (rogue, pairing.pairing_id),
            )
            code_new = pairing.wait_code()
            client.execute(  # put it back so the existing device goes on
                "UPDATE pairings SET approver_public = ? WHERE pairing_id = ?",
                (approval.public, pairing.pairing_id),
            )
            code_existing = approval.wait_code()
            assert code_new != code_existing
            # Even a user who confirms the existing device's own code gives nothing away:
            approval.approve(code_existing)
            with pytest.raises(PairingRefused, match="does not authenticate"):
                pairing.finish()
        finally:
            pairing.close()
        assert SyncEngine(mem_b).settings() is None


def test_waiting_gives_up_and_requests_are_picked_by_id(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    ticks = iter(range(0, 10_000, 30))
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine_a, _):
        with pytest.raises(NotFound):
            answer_pairing(engine_a)
        with Memory(tmp_path / "b", agent_id) as mem_b, Memory(tmp_path / "c", agent_id) as mem_c:
            first = start_pairing(
                mem_b, sqld.url, sqld.token, sleep=lambda s: None, clock=lambda: next(ticks)
            )
            second = start_pairing(mem_c, sqld.url, sqld.token, sleep=NoSleep())
            try:
                with pytest.raises(PairingTimeout) as err:
                    first.wait_code(timeout=60)
                assert err.value.exit_code == 57
                assert {p.request_id for p in pending_pairings(engine_a)} == {
                    first.request_id,
                    second.request_id,
                }
                with pytest.raises(InvalidInput, match="several"):
                    answer_pairing(engine_a)
                approval = answer_pairing(engine_a, second.request_id, sleep=NoSleep())
                with pytest.raises(PairingRefused, match="already answered"):
                    answer_pairing(engine_a, second.request_id)
                code = second.wait_code()
                assert approval.wait_code() == code
                approval.approve(code.upper().replace(" ", "-"))
                assert second.finish().via == "pairing"
                first.cancel()
                assert pending_pairings(engine_a) == []
            finally:
                first.close()
                second.close()


# ------------------------------------------------------------------------------ crypto


def _transcript(data: st.DataObject) -> crypto.PairingTranscript:
    def blob(n: int) -> bytes:
        return data.draw(st.binary(min_size=n, max_size=n))

    return crypto.PairingTranscript(
        agent_id=data.draw(st.text(min_size=1, max_size=20)),
        pairing_id=blob(16),
        new_public=blob(32),
        new_nonce=blob(16),
        approver_public=blob(32),
        approver_nonce=blob(16),
    )


FIELDS = ("agent_id", "pairing_id", "new_public", "new_nonce", "approver_public", "approver_nonce")


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_code_changes_when_any_field_of_the_transcript_changes(data: st.DataObject) -> None:
    transcript = _transcript(data)
    code = crypto.pairing_code(transcript)
    assert len(code.split()) == 6 and codes_match(code, code.upper())
    field = data.draw(st.sampled_from(FIELDS))
    value = getattr(transcript, field)
    changed = value + "x" if isinstance(value, str) else bytes([value[0] ^ 1]) + value[1:]
    other = crypto.PairingTranscript(
        **{f: getattr(transcript, f) for f in FIELDS} | {field: changed}
    )
    assert crypto.pairing_code(other) != code


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_the_sealed_answer_opens_only_for_its_transcript(data: st.DataObject) -> None:
    approver, new = crypto.generate_device_key(), crypto.generate_device_key()
    base = _transcript(data)
    transcript = crypto.PairingTranscript(
        **{f: getattr(base, f) for f in FIELDS}
        | {
            "new_public": crypto.device_public_bytes(new),
            "approver_public": crypto.device_public_bytes(approver),
        }
    )
    epoch = data.draw(st.integers(1, 2**32 - 1))
    key = crypto.generate_vault_key()
    bundle = crypto.seal_pairing_bundle(approver, transcript, epoch, key)
    assert crypto.open_pairing_bundle(new, transcript, bundle) == (epoch, key)
    field = data.draw(st.sampled_from(("agent_id", "pairing_id", "new_nonce", "approver_nonce")))
    value = getattr(transcript, field)
    changed = value + "x" if isinstance(value, str) else bytes([value[0] ^ 1]) + value[1:]
    other = crypto.PairingTranscript(
        **{f: getattr(transcript, f) for f in FIELDS} | {field: changed}
    )
    with pytest.raises(crypto.WrongKey):
        crypto.open_pairing_bundle(new, other, bundle)
    flipped = data.draw(st.integers(0, len(bundle) - 1))
    damaged = bytearray(bundle)
    damaged[flipped] ^= 1
    with pytest.raises(crypto.WrongKey):
        crypto.open_pairing_bundle(new, transcript, bytes(damaged))


def test_pairing_code_and_commitment_known_answers() -> None:
    """Pinned values (a change to the code derivation breaks pairing between versions), and
    the commitment recomputed independently from its definition."""
    transcript = crypto.PairingTranscript(
        agent_id="agent",
        pairing_id=bytes(16),
        new_public=bytes(range(32)),
        new_nonce=bytes(16),
        approver_public=bytes(range(32, 64)),
        approver_nonce=bytes(16),
    )
    assert crypto.pairing_code(transcript) == "stormy crackdown stockman optic facial tiger"
    commitment = crypto.pairing_commitment(bytes(range(32)), bytes(16))
    assert commitment.hex() == "6d9c188f7fb8cfd65ca1675bae7334ac5ad16841d10beec83ab037e7dde5add5"

    def lp(b: bytes) -> bytes:
        return len(b).to_bytes(4, "big") + b

    expected = hashlib.sha256(
        b"tiermem/v1/pairing-commit" + lp(bytes(range(32))) + lp(bytes(16))
    ).digest()
    assert commitment == expected
    with pytest.raises(crypto.MalformedKey):
        crypto.pairing_commitment(bytes(31), bytes(16))


# ---------------------------------------------------------------------------------- the CLI

PATIENCE = 60.0


def _tiermem(home: Path, agent_id: str, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tiermem.tui", "--home", str(home), "--agent-id", agent_id, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


class Lines:
    """A process's stderr, read line by line on a thread (so waiting can time out)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._pump, args=(proc.stderr,))
        self.thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.queue.put(line)

    def until(self, marker: str) -> list[str]:
        start = len(self.seen)
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(line)
            if marker in line:
                return self.seen[start:]
        raise AssertionError(f"{marker!r} never came; stderr so far: {''.join(self.seen)}")

    def rest(self) -> str:
        """Everything after what `until` read, once the stream ended."""
        self.thread.join(PATIENCE)
        lines = []
        while not self.queue.empty():
            lines.append(self.queue.get())
        return "".join(lines)


def _code_from(lines: list[str]) -> str:
    return next(line.strip() for line in reversed(lines) if len(line.split()) == 6)


@pytest.mark.parametrize("matching", [True, False])
def test_pairing_through_the_cli_on_two_processes(
    tmp_path: Path, agent_id: str, sqld: SqldServer, matching: bool
) -> None:
    env = {**os.environ, "TIERMEM_SECRET_STORE": "file", "TIERMEM_SYNC_TOKEN": sqld.token}
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, _):
        mem_a.add_lesson("the greenhouse vents open at 25 degrees", 0.9, "garden/greenhouse")
        engine_a.push(policy())
    new = _tiermem(
        tmp_path / "b",
        agent_id,
        "--json",
        "sync",
        "add-device",
        "--pair",
        "--url",
        sqld.url,
        "--name",
        "tablet",
        "--wait",
        str(PATIENCE),
        env=env,
    )
    lines = Lines(new)
    try:
        lines.until("approve-device")
        existing = _tiermem(
            tmp_path / "a", agent_id, "--json", "sync", "approve-device", "--wait", "60", env=env
        )
        code = _code_from(lines.until("waiting for the approval"))
        typed = code if matching else "aardvark absurd accrue acme adrift adult"
        out_e, err_e = existing.communicate(typed + "\n", timeout=PATIENCE)
        assert new.stdout is not None
        out_n = new.stdout.read()
        new.wait(timeout=PATIENCE)
        err_n = lines.rest()
    finally:
        new.kill()
        new.wait(timeout=PATIENCE)
        lines.thread.join(PATIENCE)
        for stream in (new.stdin, new.stdout, new.stderr):
            assert stream is not None
            stream.close()
    assert not sentinels.leaks(out_n + err_n)
    if matching:
        assert existing.returncode == 0, err_e
        assert json.loads(out_e)["code"] == code and code in err_e
        assert new.returncode == 0, err_n
        joined = json.loads(out_n)
        assert joined["via"] == "pairing" and joined["code"] == code
        with Memory(tmp_path / "b", agent_id) as mem_b:
            assert "the greenhouse vents open at 25 degrees" in [
                lesson.text for lesson in mem_b.hot().critical_lessons
            ]
    else:
        assert existing.returncode == 56 and "codes differ" in err_e
        assert new.returncode == 56 and err_n.strip().splitlines()[-1].startswith("tiermem: error")
        with Memory(tmp_path / "b", agent_id) as mem_b:
            assert SyncEngine(mem_b).settings() is None


def test_pairing_and_removal_on_terminals(tmp_path: Path, agent_id: str, sqld: SqldServer) -> None:
    """Both screens show the words, both sides confirm; then the device is removed after a
    confirmation and the hidden recovery key."""
    env = terminal_env(sqld.token)
    with first_device(tmp_path / "a", agent_id, sqld) as (_, _, recovery):
        pass
    base = ["--agent-id", agent_id, "sync"]
    new_args = ["--home", str(tmp_path / "b"), *base, "add-device", "--url", sqld.url]
    with Terminal([*new_args, "--name", "tablet"], env) as new:
        new.expect("approve-device")
        with Terminal(["--home", str(tmp_path / "a"), *base, "approve-device"], env) as old:
            shown_old = six_words(old.expect("Type the words the new device shows"))
            shown_new = six_words(new.expect("Does the other device show the same words?"))
            assert shown_old == shown_new
            new.send("y")
            old.send(shown_new)
            old.expect("approved pairing request")
            assert old.finish() == 0
        new.expect("joined with the pairing")
        assert new.finish() == 0
    with Memory(tmp_path / "b", agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
        tablet = sync_settings(engine_b).device_id.hex()
    remove = ["--home", str(tmp_path / "a"), *base, "remove-device", tablet[:10]]
    with Terminal(remove, env) as term:
        shown = term.expect("Go ahead?")
        assert "Keeps access:" in shown and tablet[:12] in shown.split("Keeps access:")[0]
        term.send("y")
        term.expect("Recovery key")
        term.send(crypto.format_recovery_key(recovery))
        said = term.expect("NOT protected")
        assert "epoch 1 to 2" in said
        assert term.finish() == 0
        assert crypto.format_recovery_key(recovery) not in term.output
    with (
        Memory(tmp_path / "b", agent_id) as mem_b,
        SyncEngine(mem_b) as engine_b,
        pytest.raises(epochs.DeviceRevoked),
    ):
        engine_b.use_token(sqld.token)  # the terminal had it from the environment
        epochs.refresh_epoch(engine_b)


def test_a_no_on_the_new_devices_terminal_refuses_the_pairing(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    env = terminal_env(sqld.token)
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine_a, _):
        args = ["--home", str(tmp_path / "b"), "--agent-id", agent_id, "sync", "add-device"]
        with Terminal([*args, "--url", sqld.url], env) as new:
            new.expect("approve-device")
            approval = answer_pairing(engine_a, sleep=NoSleep())
            shown = six_words(new.expect("Does the other device show the same words?"))
            assert approval.wait_code() == shown
            new.send("n")
            new.expect("pairing refused here")
            assert new.finish() == 56
        with pytest.raises(PairingRefused, match="gone"):  # the request was withdrawn
            approval.approve(shown)
        assert len(list_devices(engine_a)) == 1
