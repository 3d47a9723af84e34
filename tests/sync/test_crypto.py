"""tiermem.sync.crypto: known-answer vectors, round trips, and every way a blob can be wrong."""

from __future__ import annotations

import dataclasses
import json
import struct
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tiermem.core.errors import InvalidInput, TiermemError
from tiermem.sync import crypto as c
from tiermem.sync.crypto import pairing as crypto_pairing

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "crypto" / "vectors-v1.json").read_text("utf-8")
)
# Modest by default: the suite stays fast. No deadline: tests never assert timings.
FAST = settings(max_examples=40, deadline=None, database=None)
# The Argon2id floor accepted on decode, so passphrase tests cost milliseconds.
CHEAP_KDF = c.KdfParameters(memory_kib=8 * 1024, iterations=1, lanes=1)

VK = bytes(range(32))
CTX = c.RecordContext(
    agent_id="default",
    table="warm",
    record_id=bytes(16),
    version="0001HLC7Q2K9-0003-a1b2c3d4",
    device_id=b"\x01" * 16,
)
WCTX = c.WrapContext(agent_id="default", epoch=1, wrap_id=b"w" * 16)

text_fields = st.text(max_size=40)
contexts = st.builds(
    c.RecordContext,
    agent_id=text_fields,
    table=text_fields,
    record_id=st.binary(max_size=32),
    version=text_fields,
    device_id=st.binary(max_size=32),
)


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def h(value: str) -> bytes:
    return bytes.fromhex(value)


# ----------------------------------------------------------------------- known-answer vectors


@pytest.mark.parametrize("vec", VECTORS["records"], ids=lambda v: v["name"])
def test_record_vectors_open_and_reseal_byte_for_byte(vec: dict[str, Any]) -> None:
    ctx = c.RecordContext(
        vec["agent_id"], vec["table"], h(vec["record_id"]), vec["version"], h(vec["device_id"])
    )
    envelope = h(vec["envelope"])
    assert c.record_aad(vec["epoch"], ctx) == h(vec["aad"])
    assert c.parse_envelope(envelope).epoch == vec["epoch"]
    assert c.open_record(h(vec["vault_key"]), ctx, envelope) == h(vec["plaintext"])
    resealed = c.seal_record(
        h(vec["vault_key"]),
        vec["epoch"],
        ctx,
        h(vec["plaintext"]),
        min_bucket=vec["min_bucket"],
        salt=h(vec["salt"]),
        nonce=h(vec["nonce"]),
    )
    assert resealed == envelope


def test_envelope_layout_matches_the_spec_independently() -> None:
    """Rebuild one vector from raw primitives, following only the documented layout."""
    vec = VECTORS["records"][1]
    vk, salt, nonce, pt = (h(vec[k]) for k in ("vault_key", "salt", "nonce", "plaintext"))

    def lp(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    prefix = b"TMEM" + bytes([1, 1]) + struct.pack(">I", vec["epoch"])
    aad = (
        prefix
        + lp(vec["agent_id"].encode())
        + lp(vec["table"].encode())
        + lp(h(vec["record_id"]))
        + lp(vec["version"].encode())
        + lp(h(vec["device_id"]))
    )
    padded = struct.pack(">I", len(pt)) + pt
    padded += bytes(max(256, 1 << (len(padded) - 1).bit_length()) - len(padded))
    key = HKDF(hashes.SHA256(), 32, salt, b"tiermem/v1/record").derive(vk)
    expected = prefix + salt + nonce + AESGCM(key).encrypt(nonce, padded, aad)
    assert expected.hex() == vec["envelope"]
    assert len(expected) == c.ENVELOPE_HEADER_LEN + 256 + 16


@pytest.mark.parametrize("vec", VECTORS["record_ids"], ids=lambda v: v["table"])
def test_record_id_vectors(vec: dict[str, Any]) -> None:
    rid = c.record_id(h(vec["vault_key"]), vec["table"], vec["primary_key"])
    assert rid.hex() == vec["record_id"]


@pytest.mark.parametrize("vec", VECTORS["recovery_keys"], ids=lambda v: v["key"][:8])
def test_recovery_key_vectors(vec: dict[str, Any]) -> None:
    assert c.format_recovery_key(h(vec["key"])) == vec["formatted"]
    assert c.parse_recovery_key(vec["formatted"]) == h(vec["key"])


def _wctx(vec: dict[str, Any]) -> c.WrapContext:
    return c.WrapContext(vec["agent_id"], vec["epoch"], h(vec["wrap_id"]))


def test_recovery_wrap_vector() -> None:
    (vec,) = VECTORS["recovery_wraps"]
    blob, rk = h(vec["blob"]), h(vec["recovery_key"])
    assert c.unwrap_with_recovery_key(blob, rk, _wctx(vec)) == h(vec["vault_key"])
    again = c.wrap_with_recovery_key(
        h(vec["vault_key"]), rk, _wctx(vec), nonce=h(vec["nonce"]), fmt=c.FORMAT_V1
    )
    assert again == blob


def test_passphrase_wrap_vector() -> None:
    (vec,) = VECTORS["passphrase_wraps"]
    blob = h(vec["blob"])
    params = c.KdfParameters(vec["memory_kib"], vec["iterations"], vec["lanes"])
    parsed = c.parse_wrap(blob)
    assert isinstance(parsed, c.PassphraseWrap)
    assert parsed.params == params
    assert c.unwrap_with_passphrase(blob, vec["passphrase"], _wctx(vec)) == h(vec["vault_key"])
    again = c.wrap_with_passphrase(
        h(vec["vault_key"]),
        vec["passphrase"],
        _wctx(vec),
        params=params,
        salt=h(vec["salt"]),
        nonce=h(vec["nonce"]),
        fmt=c.FORMAT_V1,
    )
    assert again == blob


def test_device_wrap_vector() -> None:
    (vec,) = VECTORS["device_wraps"]
    blob = h(vec["blob"])
    device = c.load_device_private_key(h(vec["device_private"]))
    assert c.unwrap_for_device(blob, device, _wctx(vec)) == h(vec["vault_key"])
    again = c.wrap_for_device(
        h(vec["vault_key"]),
        device.public_key(),
        _wctx(vec),
        ephemeral_key=c.load_device_private_key(h(vec["ephemeral_private"])),
        nonce=h(vec["nonce"]),
        fmt=c.FORMAT_V1,
    )
    assert again == blob


@pytest.mark.parametrize("vec", VECTORS["sas"], ids=lambda v: v["public_key"][:8])
def test_sas_vectors(vec: dict[str, Any]) -> None:
    pub = h(vec["public_key"])
    assert c.short_auth_string(pub) == vec["words"]
    assert c.short_auth_string(c.load_device_public_key(pub)) == vec["words"]


# -------------------------------------------------------------------------- record envelopes


@FAST
@given(plaintext=st.binary(max_size=64 * 1024), ctx=contexts, epoch=st.integers(0, 2**32 - 1))
@example(plaintext=b"", ctx=CTX, epoch=0)
@example(plaintext=b"\xff" * (64 * 1024), ctx=CTX, epoch=2**32 - 1)
@example(plaintext=b"x" * 252, ctx=CTX, epoch=1)  # exactly fills the 256 B bucket
def test_seal_open_round_trip(plaintext: bytes, ctx: c.RecordContext, epoch: int) -> None:
    envelope = c.seal_record(VK, epoch, ctx, plaintext)
    assert c.parse_envelope(envelope).epoch == epoch
    assert c.open_record(VK, ctx, envelope) == plaintext


_MUTATIONS: dict[str, Any] = {
    "agent_id": "other-agent",
    "table": "hot",
    "record_id": b"\x00" * 15 + b"\x01",
    "version": "0001HLC7Q2K9-0003-a1b2c3d5",
    "device_id": b"\x02" * 16,
}


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(c.RecordContext)])
def test_every_single_aad_field_mutation_is_tampering(field: str) -> None:
    envelope = c.seal_record(VK, 1, CTX, b"the user prefers tea")
    moved = dataclasses.replace(CTX, **{field: _MUTATIONS[field]})
    with pytest.raises(c.TamperedData):
        c.open_record(VK, moved, envelope)


def test_epoch_in_header_is_authenticated() -> None:
    envelope = c.seal_record(VK, 5, CTX, b"x")
    relabelled = envelope[:6] + struct.pack(">I", 6) + envelope[10:]
    with pytest.raises(c.TamperedData):
        c.open_record(VK, CTX, relabelled)


@FAST
@given(a=contexts, b=contexts)
def test_any_context_difference_fails(a: c.RecordContext, b: c.RecordContext) -> None:
    envelope = c.seal_record(VK, 1, a, b"payload")
    if a == b:
        assert c.open_record(VK, b, envelope) == b"payload"
    else:
        with pytest.raises(c.TamperedData):
            c.open_record(VK, b, envelope)


@FAST
@given(
    plaintext=st.binary(max_size=600),
    edit=st.tuples(st.integers(0, 2**16), st.integers(0, 64), st.binary(max_size=64)),
)
def test_any_mutation_of_an_envelope_fails(plaintext: bytes, edit: tuple[int, int, bytes]) -> None:
    """Replace any slice of the envelope with any bytes (a flip, a cut, an insertion, a swap):
    unless that leaves it unchanged, opening it fails with a declared error."""
    envelope = c.seal_record(VK, 1, CTX, plaintext)
    start, length, replacement = edit
    start %= len(envelope) + 1
    mutated = envelope[:start] + replacement + envelope[start + length :]
    if mutated == envelope:
        assert c.open_record(VK, CTX, mutated) == plaintext
        return
    with pytest.raises((c.TamperedData, c.UnsupportedFormat)):
        c.open_record(VK, CTX, mutated)


def test_aad_is_canonical_across_field_boundaries() -> None:
    one = dataclasses.replace(CTX, table="ab", version="c")
    two = dataclasses.replace(CTX, table="a", version="bc")
    three = dataclasses.replace(CTX, record_id=b"ab", device_id=b"c")
    four = dataclasses.replace(CTX, record_id=b"a", device_id=b"bc")
    assert c.record_aad(1, one) != c.record_aad(1, two)
    assert c.record_aad(1, three) != c.record_aad(1, four)


def test_every_bit_flip_of_a_small_envelope_is_rejected() -> None:
    envelope = c.seal_record(VK, 1, CTX, b"")
    assert len(envelope) == c.ENVELOPE_HEADER_LEN + c.MIN_BUCKET + 16
    for bit in range(len(envelope) * 8):
        expected = c.UnsupportedFormat if bit < 6 * 8 else c.TamperedData  # magic, fmt, suite
        with pytest.raises(expected):
            c.open_record(VK, CTX, flip(envelope, bit))


def test_truncation_and_trailing_bytes_are_rejected() -> None:
    envelope = c.seal_record(VK, 1, CTX, b"abc")
    for cut in range(len(envelope)):
        with pytest.raises((c.UnsupportedFormat, c.TamperedData)):
            c.open_record(VK, CTX, envelope[:cut])
    with pytest.raises(c.TamperedData):
        c.open_record(VK, CTX, envelope + b"\x00")


def test_wrong_vault_key_or_epoch_key_is_tampering() -> None:
    envelope = c.seal_record(VK, 2, CTX, b"x")
    with pytest.raises(c.TamperedData):
        c.open_record(c.generate_vault_key(), CTX, envelope)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda e: b"TMEX" + e[4:], "magic"),
        (lambda e: e[:4] + b"\x02" + e[5:], "fmt"),
        (lambda e: e[:4] + b"\x00" + e[5:], "fmt"),
        (lambda e: e[:5] + b"\x02" + e[6:], "suite"),  # reserved for ChaCha20-Poly1305
        (lambda e: e[:5] + b"\xff" + e[6:], "suite"),
        (lambda e: b"", "empty"),
        (lambda e: b"TMEM", "short"),
    ],
)
def test_unknown_format_or_suite(mutate: Callable[[bytes], bytes], reason: str) -> None:
    envelope = c.seal_record(VK, 1, CTX, b"x")
    with pytest.raises(c.UnsupportedFormat):
        c.open_record(VK, CTX, mutate(envelope))


@settings(max_examples=300, deadline=None, database=None)
@given(data=st.binary(max_size=400) | st.binary(max_size=400).map(lambda b: b"TMEM\x01\x01" + b))
def test_envelope_parser_raises_only_declared_errors_and_is_not_malleable(data: bytes) -> None:
    try:
        env = c.parse_envelope(data)
    except (c.UnsupportedFormat, c.TamperedData):
        return
    assert env.to_bytes() == data
    with pytest.raises(c.TamperedData):
        c.open_record(VK, CTX, data)


def test_no_repeated_salt_or_nonce() -> None:
    seen = set()
    for _ in range(2000):
        env = c.parse_envelope(c.seal_record(VK, 1, CTX, b"same plaintext"))
        seen.add(env.salt)
        seen.add(env.nonce)
    assert len(seen) == 4000


def test_injected_randomness_must_have_the_right_length() -> None:
    with pytest.raises(ValueError):
        c.seal_record(VK, 1, CTX, b"x", salt=b"short")
    with pytest.raises(ValueError):
        c.seal_record(VK, 1, CTX, b"x", nonce=b"short")
    with pytest.raises(ValueError):
        c.seal_record(b"short key", 1, CTX, b"x")
    with pytest.raises(ValueError):
        c.seal_record(VK, 2**32, CTX, b"x")


# --------------------------------------------------------------------------------- padding


def test_padding_hides_exact_lengths() -> None:
    assert len(c.seal_record(VK, 1, CTX, b"a" * 10)) == len(c.seal_record(VK, 1, CTX, b"b" * 200))
    small = c.seal_record(VK, 1, CTX, b"a" * 10, min_bucket=c.SNAPSHOT_BUCKET)
    large = c.seal_record(VK, 1, CTX, b"b" * 8000, min_bucket=c.SNAPSHOT_BUCKET)
    assert len(small) == len(large) == c.ENVELOPE_HEADER_LEN + c.SNAPSHOT_BUCKET + 16


@pytest.mark.parametrize(
    ("length", "size"),
    [(0, 256), (252, 256), (253, 512), (508, 512), (509, 1024), (64 * 1024, 128 * 1024)],
)
def test_bucket_sizes(length: int, size: int) -> None:
    assert c.padded_size(length) == size
    assert len(c.pad(b"z" * length)) == size


def test_snapshot_bucket_and_growth_beyond_it() -> None:
    assert c.padded_size(10, c.SNAPSHOT_BUCKET) == 8192
    assert c.padded_size(8188, c.SNAPSHOT_BUCKET) == 8192
    assert c.padded_size(8189, c.SNAPSHOT_BUCKET) == 16384
    with pytest.raises(ValueError):
        c.padded_size(1, 300)


@FAST
@given(st.binary(max_size=5000), st.sampled_from([256, 512, 8192]))
def test_pad_unpad_round_trip(data: bytes, bucket: int) -> None:
    assert c.unpad(c.pad(data, bucket)) == data


@pytest.mark.parametrize(
    "padded",
    [
        b"",
        bytes(255),
        bytes(300),  # not a power of two
        struct.pack(">I", 253) + bytes(252),  # length beyond the buffer
        struct.pack(">I", 1) + b"a" + b"\x00" * 250 + b"\x01",  # non-zero padding
    ],
)
def test_unpad_is_strict(padded: bytes) -> None:
    with pytest.raises(c.TamperedData):
        c.unpad(padded)


# ------------------------------------------------------------------------------ record ids


def test_record_ids_are_deterministic_and_separated() -> None:
    other = c.generate_vault_key()
    rid = c.record_id(VK, "warm", "m1")
    assert len(rid) == c.RECORD_ID_LEN
    assert rid == c.record_id(VK, "warm", "m1") == c.record_id(VK, "warm", b"m1")
    distinct = {
        rid,
        c.record_id(VK, "cold", "m1"),
        c.record_id(VK, "warm", "m2"),
        c.record_id(other, "warm", "m1"),
        c.record_id(VK, "warm", ""),
        c.record_id(VK, "war", "mm1"),
    }
    assert len(distinct) == 6


def test_record_id_rejects_ambiguous_tables() -> None:
    with pytest.raises(ValueError):
        c.record_id(VK, "warm\x00x", "m1")
    with pytest.raises(ValueError):
        c.record_id(VK, "", "m1")


# --------------------------------------------------------------------------- recovery keys


@FAST
@given(st.binary(min_size=32, max_size=32))
def test_recovery_key_format_round_trip(key: bytes) -> None:
    text = c.format_recovery_key(key)
    groups = text.split("-")
    assert len(groups) == 14
    assert all(len(g) == 4 for g in groups)
    assert c.parse_recovery_key(text) == key
    assert c.parse_recovery_key(text.lower().replace("-", " ")) == key
    assert c.parse_recovery_key("  " + text.replace("-", "") + "\n") == key
    assert c.parse_recovery_key(text.replace("0", "o").replace("1", "l")) == key


def test_every_single_character_typo_is_malformed_not_wrong() -> None:
    key = c.generate_recovery_key()
    text = c.format_recovery_key(key).replace("-", "")
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    for i, original in enumerate(text):
        for replacement in alphabet:
            if replacement != original:
                with pytest.raises(c.MalformedKey):
                    c.parse_recovery_key(text[:i] + replacement + text[i + 1 :])
    for i in range(len(text) - 1):
        if text[i] != text[i + 1]:
            with pytest.raises(c.MalformedKey):
                c.parse_recovery_key(text[:i] + text[i + 1] + text[i] + text[i + 2 :])


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[:-1],  # a character short
        lambda t: t + "A",  # one too many
        lambda t: "U" + t[1:],  # U is not in the alphabet
        lambda t: "!" + t[1:],
        lambda t: "",
    ],
)
def test_malformed_recovery_keys(mangle: Callable[[str], str]) -> None:
    text = c.format_recovery_key(c.generate_recovery_key())
    with pytest.raises(c.MalformedKey):
        c.parse_recovery_key(mangle(text))


# -------------------------------------------------------------------------------- key wraps


def test_recovery_wrap_round_trip_and_wrong_key() -> None:
    vk, rk = c.generate_vault_key(), c.generate_recovery_key()
    blob = c.wrap_with_recovery_key(vk, rk, WCTX)
    typed = c.format_recovery_key(rk)
    assert c.unwrap_with_recovery_key(blob, c.parse_recovery_key(typed), WCTX) == vk
    other = c.parse_recovery_key(c.format_recovery_key(c.generate_recovery_key()))
    with pytest.raises(c.WrongKey):
        c.unwrap_with_recovery_key(blob, other, WCTX)


@pytest.mark.parametrize(
    "moved",
    [
        dataclasses.replace(WCTX, agent_id="other"),
        dataclasses.replace(WCTX, epoch=2),
        dataclasses.replace(WCTX, wrap_id=b"x" * 16),
    ],
)
def test_wraps_are_bound_to_their_context(moved: c.WrapContext) -> None:
    vk, rk = c.generate_vault_key(), c.generate_recovery_key()
    device = c.generate_device_key()
    with pytest.raises(c.WrongKey):
        c.unwrap_with_recovery_key(c.wrap_with_recovery_key(vk, rk, WCTX), rk, moved)
    with pytest.raises(c.WrongKey):
        c.unwrap_for_device(c.wrap_for_device(vk, device.public_key(), WCTX), device, moved)
    blob = c.wrap_with_passphrase(vk, "pass phrase", WCTX, params=CHEAP_KDF)
    with pytest.raises(c.WrongPassphrase):
        c.unwrap_with_passphrase(blob, "pass phrase", moved)


def test_passphrase_wrap_round_trip_wrong_passphrase_and_nfkc() -> None:
    vk = c.generate_vault_key()
    composed = "café ｆｕｌｌwidth"
    blob = c.wrap_with_passphrase(vk, composed, WCTX, params=CHEAP_KDF)
    assert c.unwrap_with_passphrase(blob, composed, WCTX) == vk
    decomposed = unicodedata.normalize("NFD", "café fullwidth")
    assert c.unwrap_with_passphrase(blob, decomposed, WCTX) == vk
    for wrong in ("cafe fullwidth", "café fullwidth ", ""):
        with pytest.raises(c.WrongPassphrase):
            c.unwrap_with_passphrase(blob, wrong, WCTX)


def test_passphrase_wrap_stores_its_parameters() -> None:
    blob = c.wrap_with_passphrase(c.generate_vault_key(), "pw", WCTX, params=CHEAP_KDF)
    wrap = c.parse_wrap(blob)
    assert isinstance(wrap, c.PassphraseWrap)
    assert wrap.params == CHEAP_KDF
    assert wrap.to_bytes() == blob
    assert c.KdfParameters(64 * 1024, 3, 4) == c.DEFAULT_KDF_PARAMS


OUT_OF_BOUNDS = [
    c.KdfParameters(8 * 1024 - 1, 1, 1),
    c.KdfParameters(1024 * 1024 + 1, 1, 1),
    c.KdfParameters(8 * 1024, 0, 1),
    c.KdfParameters(8 * 1024, 11, 1),
    c.KdfParameters(8 * 1024, 1, 0),
    c.KdfParameters(8 * 1024, 1, 17),
    c.KdfParameters(2**32 - 1, 2**32 - 1, 2**32 - 1),
]


@pytest.mark.parametrize("params", OUT_OF_BOUNDS)
def test_out_of_bound_kdf_parameters_are_refused(params: c.KdfParameters) -> None:
    vk = c.generate_vault_key()
    with pytest.raises(c.KdfParametersOutOfBounds):
        c.wrap_with_passphrase(vk, "pw", WCTX, params=params)
    # A hostile wrap: take a good one and rewrite its parameters. Refused before Argon2id runs
    # (a 4 GiB-lane, 2^32-iteration derivation would never return).
    good = c.wrap_with_passphrase(vk, "pw", WCTX, params=CHEAP_KDF)
    hostile = good[:6] + struct.pack(">III", *dataclasses.astuple(params)) + good[18:]
    with pytest.raises(c.KdfParametersOutOfBounds):
        c.unwrap_with_passphrase(hostile, "pw", WCTX)


@pytest.mark.parametrize(
    "params",
    [c.KdfParameters(8 * 1024, 1, 1), c.KdfParameters(8 * 1024, 10, 16)],
)
def test_kdf_bounds_are_inclusive(params: c.KdfParameters) -> None:
    c.check_kdf_parameters(params)
    c.check_kdf_parameters(c.KdfParameters(1024 * 1024, 1, 1))


def test_empty_passphrase_cannot_wrap() -> None:
    with pytest.raises(InvalidInput):
        c.wrap_with_passphrase(c.generate_vault_key(), "", WCTX, params=CHEAP_KDF)


def test_device_wrap_round_trip_and_wrong_device() -> None:
    vk = c.generate_vault_key()
    phone, laptop = c.generate_device_key(), c.generate_device_key()
    pub = c.load_device_public_key(c.device_public_bytes(phone))
    blob = c.wrap_for_device(vk, pub, WCTX)
    assert c.unwrap_for_device(blob, phone, WCTX) == vk
    restored = c.load_device_private_key(phone.private_bytes_raw())
    assert c.unwrap_for_device(blob, restored, WCTX) == vk
    with pytest.raises(c.WrongKey):
        c.unwrap_for_device(blob, laptop, WCTX)
    # Two wraps to the same device never share an ephemeral key.
    assert blob[6:38] != c.wrap_for_device(vk, pub, WCTX)[6:38]


def test_rotation_locks_out_removed_device_and_old_key() -> None:
    vk1, vk2 = c.generate_vault_key(), c.generate_vault_key()
    kept, removed = c.generate_device_key(), c.generate_device_key()
    ctx2 = dataclasses.replace(WCTX, epoch=2)
    blob = c.wrap_for_device(vk2, kept.public_key(), ctx2)
    with pytest.raises(c.WrongKey):
        c.unwrap_for_device(blob, removed, ctx2)
    envelope = c.seal_record(c.unwrap_for_device(blob, kept, ctx2), 2, CTX, b"new secret")
    with pytest.raises(c.TamperedData):
        c.open_record(vk1, CTX, envelope)


def test_low_order_ephemeral_key_is_tampering() -> None:
    device = c.generate_device_key()
    blob = c.wrap_for_device(c.generate_vault_key(), device.public_key(), WCTX)
    zeroed = blob[:6] + bytes(32) + blob[38:]
    with pytest.raises(c.TamperedData):
        c.unwrap_for_device(zeroed, device, WCTX)


def test_wrong_kind_of_wrap_is_unsupported() -> None:
    vk, rk = c.generate_vault_key(), c.generate_recovery_key()
    blob = c.wrap_with_recovery_key(vk, rk, WCTX)
    with pytest.raises(c.UnsupportedFormat):
        c.unwrap_with_passphrase(blob, "pw", WCTX)
    with pytest.raises(c.UnsupportedFormat):
        c.unwrap_for_device(blob, c.generate_device_key(), WCTX)


def test_every_bit_flip_of_wraps_is_rejected() -> None:
    vk, rk = c.generate_vault_key(), c.generate_recovery_key()
    device = c.generate_device_key()
    recovery = c.wrap_with_recovery_key(vk, rk, WCTX)
    to_device = c.wrap_for_device(vk, device.public_key(), WCTX)
    for bit in range(len(recovery) * 8):
        header_error = (c.UnsupportedFormat, c.TamperedData)  # a kind flip changes the length
        with pytest.raises(header_error if bit < 6 * 8 else c.WrongKey):
            c.unwrap_with_recovery_key(flip(recovery, bit), rk, WCTX)
    for bit in range(len(to_device) * 8):
        with pytest.raises(header_error if bit < 6 * 8 else (c.WrongKey, c.TamperedData)):
            c.unwrap_for_device(flip(to_device, bit), device, WCTX)


def test_passphrase_wrap_bit_flips_outside_the_kdf_fields() -> None:
    blob = c.wrap_with_passphrase(c.generate_vault_key(), "pw", WCTX, params=CHEAP_KDF)
    salt_start = 6 + 12
    for bit in range(salt_start * 8, len(blob) * 8, 11):  # every 11th bit: Argon2id per flip
        with pytest.raises(c.WrongPassphrase):
            c.unwrap_with_passphrase(flip(blob, bit), "pw", WCTX)


@pytest.mark.parametrize(
    ("blob", "error"),
    [
        (b"", c.UnsupportedFormat),
        (b"TMEM\x01\x01" + bytes(60), c.UnsupportedFormat),
        (b"TMWK\x03\x01" + bytes(60), c.UnsupportedFormat),
        (b"TMWK\x01\x09" + bytes(60), c.UnsupportedFormat),
        (b"TMWK\x01\x01" + bytes(59), c.TamperedData),
        (b"TMWK\x01\x01" + bytes(61), c.TamperedData),
    ],
)
def test_wrap_parser_errors(blob: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        c.parse_wrap(blob)


@settings(max_examples=300, deadline=None, database=None)
@given(
    data=st.binary(max_size=120)
    | st.tuples(st.sampled_from([1, 2, 3]), st.binary(max_size=110)).map(
        lambda t: b"TMWK\x01" + bytes([t[0]]) + t[1]
    )
)
def test_wrap_parser_raises_only_declared_errors_and_is_not_malleable(data: bytes) -> None:
    try:
        wrap = c.parse_wrap(data)
    except (c.UnsupportedFormat, c.TamperedData):
        return
    assert wrap.to_bytes() == data


# ---------------------------------------------------------------------- device keys and SAS


def test_sas_is_six_words_deterministic_and_key_specific() -> None:
    a, b = c.generate_device_key(), c.generate_device_key()
    sas = c.short_auth_string(a.public_key())
    assert len(sas.split()) == 6
    assert sas == c.short_auth_string(c.device_public_bytes(a))
    assert sas != c.short_auth_string(b.public_key())
    flipped = flip(c.device_public_bytes(a), 0)
    assert sas != c.short_auth_string(flipped)
    assert len(set(crypto_pairing._SAS_WORDS)) == 256


@pytest.mark.parametrize(
    "call",
    [
        lambda: c.load_device_public_key(b"\x01" * 31),
        lambda: c.load_device_private_key(b"\x01" * 33),
        lambda: c.short_auth_string(b"\x01" * 16),
    ],
)
def test_malformed_device_keys(call: Callable[[], object]) -> None:
    with pytest.raises(c.MalformedKey):
        call()


# --------------------------------------------------------------------- errors never leak secrets


def test_error_classes_and_exit_codes() -> None:
    classes = [
        c.WrongKey,
        c.WrongPassphrase,
        c.TamperedData,
        c.UnsupportedFormat,
        c.MalformedKey,
        c.KdfParametersOutOfBounds,
    ]
    assert [cls.exit_code for cls in classes] == [12, 13, 14, 15, 16, 17]
    assert all(issubclass(cls, c.CryptoError) for cls in classes)
    assert issubclass(c.CryptoError, TiermemError)


SENTINEL_PASSPHRASE = "SENTINEL-passphrase-7f3a"
SENTINEL_KEY = b"SENTINEL-KEY-0123456789abcdef!!!"  # 32 bytes


def _secret_forms() -> list[str]:
    rk = c.format_recovery_key(SENTINEL_KEY)
    return [
        SENTINEL_PASSPHRASE,
        SENTINEL_PASSPHRASE.lower(),
        SENTINEL_KEY.decode(),
        SENTINEL_KEY.hex(),
        repr(SENTINEL_KEY),
        rk,
        rk.replace("-", ""),
        # Any group of the recovery key on its own (all-digit groups could match a number).
        *(group for group in rk.split("-") if not group.isdigit()),
    ]


def _failures() -> list[BaseException]:
    """Trigger every error path with sentinel secrets, collecting what is raised."""
    rk_text = c.format_recovery_key(SENTINEL_KEY)
    device = c.load_device_private_key(SENTINEL_KEY)
    vk = SENTINEL_KEY
    envelope = c.seal_record(vk, 1, CTX, SENTINEL_PASSPHRASE.encode())
    p_blob = c.wrap_with_passphrase(vk, SENTINEL_PASSPHRASE, WCTX, params=CHEAP_KDF)
    r_blob = c.wrap_with_recovery_key(vk, SENTINEL_KEY, WCTX)
    d_blob = c.wrap_for_device(vk, device.public_key(), WCTX)
    calls: list[Callable[[], object]] = [
        lambda: c.open_record(vk, dataclasses.replace(CTX, table="hot"), envelope),
        lambda: c.open_record(vk, CTX, flip(envelope, 3)),
        lambda: c.open_record(vk, CTX, envelope[:-1]),
        lambda: c.unwrap_with_passphrase(p_blob, SENTINEL_PASSPHRASE + "x", WCTX),
        lambda: c.unwrap_with_passphrase(p_blob, SENTINEL_PASSPHRASE + "\ud800", WCTX),
        lambda: c.wrap_with_passphrase(vk, SENTINEL_PASSPHRASE, WCTX, params=OUT_OF_BOUNDS[0]),
        lambda: c.unwrap_with_recovery_key(r_blob, c.generate_recovery_key(), WCTX),
        lambda: c.unwrap_with_recovery_key(
            r_blob, SENTINEL_KEY, dataclasses.replace(WCTX, epoch=9)
        ),
        lambda: c.unwrap_for_device(d_blob, c.generate_device_key(), WCTX),
        lambda: c.unwrap_for_device(r_blob, device, WCTX),
        lambda: c.parse_recovery_key(rk_text[:-1] + ("A" if rk_text[-1] != "A" else "B")),
        lambda: c.parse_recovery_key(rk_text[:-1]),
        lambda: c.parse_recovery_key("U" + rk_text[1:]),
        lambda: c.load_device_private_key(SENTINEL_KEY[:31]),
    ]
    caught: list[BaseException] = []
    for call in calls:
        with pytest.raises(TiermemError) as info:
            call()
        caught.append(info.value)
    return caught


def test_no_secret_in_any_exception() -> None:
    caught = _failures()
    assert {type(e) for e in caught} >= {
        c.TamperedData,
        c.UnsupportedFormat,
        c.WrongPassphrase,
        c.WrongKey,
        c.MalformedKey,
        c.KdfParametersOutOfBounds,
        InvalidInput,
    }
    for exc in caught:
        assert exc.__cause__ is None
        assert exc.__context__ is None or exc.__suppress_context__
        context = exc.__context__
        rendered = f"{exc} {exc!r} {exc.args!r} {context!r} {getattr(context, 'args', '')!r}"
        for secret in _secret_forms():
            assert secret not in rendered, (type(exc).__name__, rendered)
