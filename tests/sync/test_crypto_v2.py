"""Key wraps of format 2 (key-committing) and signed roster entries: known-answer vectors,
the commitment checked before decrypting, no downgrade to format 1, tampered entries refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem.core.errors import RosterTampered
from tiermem.sync import crypto as c
from tiermem.sync.crypto import roster as r

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "crypto" / "vectors-v2.json").read_text("utf-8")
)
W = VECTORS["wraps"]


def h(text: str) -> bytes:
    return bytes.fromhex(text)


def ctx(kind: str, epoch: int = 3) -> c.WrapContext:
    return c.WrapContext("default", epoch, h(W["wrap_ids"][kind]))


def test_format_2_wrap_vectors_open_and_reseal_byte_for_byte() -> None:
    vk, nonce = h(W["vault_key"]), {k: h(v) for k, v in W["nonces"].items()}
    params = c.KdfParameters(*W["kdf"])
    device = c.load_device_private_key(h(W["device_private"]))
    assert c.unwrap_with_recovery_key(h(W["recovery"]), h(W["recovery_key"]), ctx("recovery")) == vk
    assert (
        c.unwrap_with_passphrase(h(W["passphrase_wrap"]), W["passphrase"], ctx("passphrase")) == vk
    )
    assert c.unwrap_for_device(h(W["device"]), device, ctx("device")) == vk
    assert c.unwrap_chain(h(W["chain"]), h(W["parent_key"]), ctx("chain")) == vk
    assert c.wrap_with_recovery_key(
        vk, h(W["recovery_key"]), ctx("recovery"), nonce=nonce["recovery"]
    ) == h(W["recovery"])
    assert c.wrap_with_passphrase(
        vk,
        W["passphrase"],
        ctx("passphrase"),
        params=params,
        salt=h(W["salt"]),
        nonce=nonce["passphrase"],
    ) == h(W["passphrase_wrap"])
    assert c.wrap_for_device(
        vk,
        device.public_key(),
        ctx("device"),
        ephemeral_key=c.load_device_private_key(h(W["ephemeral_private"])),
        nonce=nonce["device"],
    ) == h(W["device"])
    assert c.wrap_chain(vk, h(W["parent_key"]), 4, ctx("chain"), nonce=nonce["chain"]) == h(
        W["chain"]
    )


def test_new_wraps_are_format_2_and_carry_a_commitment() -> None:
    blob = c.wrap_with_recovery_key(
        c.generate_vault_key(), c.generate_recovery_key(), ctx("recovery")
    )
    wrap = c.parse_wrap(blob)
    assert wrap.fmt == c.WRAP_FORMAT == 2 and len(wrap.commit) == 32
    assert wrap.to_bytes() == blob


def test_a_wrong_commitment_is_refused_before_decrypting() -> None:
    blob = h(W["recovery"])
    for bit in range(len(blob) * 8 - 256, len(blob) * 8, 7):
        bad = bytearray(blob)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(c.WrongKey):
            c.unwrap_with_recovery_key(bytes(bad), h(W["recovery_key"]), ctx("recovery"))


def test_a_format_2_wrap_cannot_be_downgraded_to_format_1() -> None:
    blob = h(W["device"])
    downgraded = blob[:4] + bytes([c.FORMAT_V1]) + blob[5:-32]  # commitment stripped
    assert c.parse_wrap(downgraded).fmt == c.FORMAT_V1
    device = c.load_device_private_key(h(W["device_private"]))
    with pytest.raises(c.WrongKey):  # the format byte is in the associated data
        c.unwrap_for_device(downgraded, device, ctx("device"))


def test_roster_vectors_verify_with_the_recovery_key_and_pin_their_head() -> None:
    v = VECTORS["roster"]
    bodies = [b.encode() for b in v["bodies"]]
    public = r.signing_public_bytes(r.recovery_signing_key(h(v["recovery_key"])))
    view = r.verify_roster(v["agent_id"], bodies, recovery_public=public)
    assert (view.seq, view.head.hex(), view.epoch) == (2, v["head"], 2)
    assert view.rotations == {2: 1767225600000}
    assert len(view.active()) == 1 and view.active()[0].added_by == r.RECOVERY


@pytest.mark.parametrize(
    "change",
    ["drop-last", "drop-middle", "swap", "edit", "other-agent", "other-recovery-key", "pinned"],
)
def test_a_tampered_roster_is_refused(change: str) -> None:
    v = VECTORS["roster"]
    bodies = [b.encode() for b in v["bodies"]]
    public = r.signing_public_bytes(r.recovery_signing_key(h(v["recovery_key"])))
    agent, pinned = v["agent_id"], None
    if change == "drop-last":
        bodies, pinned = bodies[:2], (2, h(v["head"]))
    elif change == "drop-middle":
        bodies = [bodies[0], bodies[2]]
    elif change == "swap":
        bodies = [bodies[0], bodies[2], bodies[1]]
    elif change == "edit":
        bodies[2] = bodies[2].replace(b'"epoch":2', b'"epoch":3')
    elif change == "other-agent":
        agent = "someone-else"
    elif change == "other-recovery-key":
        public = r.signing_public_bytes(r.recovery_signing_key(bytes(32)))
    else:
        pinned = (1, bytes(32))
    with pytest.raises(RosterTampered):
        r.verify_roster(agent, bodies, recovery_public=public, pinned=pinned)
