"""The remote record format (sync/records.py): payloads round-trip, damage is detected."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiermem.sync import crypto, manifest, memory_record, records

KEY = bytes(range(32))
DEVICE = bytes(16)
VERSION = "000001767225600000.000000." + "00" * 16

rows = st.builds(
    memory_record.MemoryRow,
    id=st.text("0123456789abcdef", min_size=16, max_size=16),
    text=st.text(min_size=1),
    category=st.text(),
    importance=st.floats(0, 1),
    created_at=st.floats(0, 2e9),
    access_count=st.integers(0, 2**40),
    last_access=st.none() | st.floats(0, 2e9),
    tier=st.sampled_from(["warm", "cold", "frozen"]),
    tier_changed_at=st.floats(0, 2e9),
    urls=st.lists(st.text(), max_size=3).map(tuple),
    commands=st.lists(st.text(), max_size=3).map(tuple),
    paths=st.lists(st.text(), max_size=3).map(tuple),
    source=st.text(),
    size_bytes=st.integers(0, 2**20),
    tokens=st.integers(0, 2**20),
    pinned=st.booleans(),
)


@given(rows)
def test_memory_rows_round_trip(row: memory_record.MemoryRow) -> None:
    assert memory_record.decode_memory(memory_record.encode_memory(row), row.id) == row


def test_tombstones_round_trip_and_ids_are_checked() -> None:
    plain = memory_record.encode_memory(memory_record.Tombstone("abc"))
    assert json.loads(plain) == {"format": 1, "id": "abc", "deleted": True}
    assert memory_record.decode_memory(plain) == memory_record.Tombstone("abc")
    with pytest.raises(crypto.TamperedData):
        memory_record.decode_memory(plain, "other")


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[]",
        b'{"format": 1, "id": "a", "deleted": false}',
        b'{"format": 1, "id": 3, "deleted": true}',
    ],
)
def test_malformed_memory_payloads_are_damage(payload: bytes) -> None:
    with pytest.raises(crypto.TamperedData):
        memory_record.decode_memory(payload)


ODD_VALUES = st.sampled_from(
    [None, True, False, 0, -1, 1, 2.5, 1e300, "", "warm", "x", [], ["a"], [1], {}, {"a": 1},
     ["a\nb"], [""], ["b", "a", "a"]]
)  # fmt: skip
FIELDS = st.sampled_from(
    [
        "id", "deleted", "text", "category", "importance", "created_at", "access_count",
        "last_access", "tier", "tier_changed_at", "urls", "commands", "paths", "source",
        "size_bytes", "tokens", "pinned", "changed", "reinforced", "format", "tags",
        "expires_at", "links",
    ]
)  # fmt: skip


def _outcome(decode: object, payload: bytes, arg: str | None = None) -> object:
    try:
        return decode(payload, arg)  # type: ignore[operator]
    except crypto.CryptoError as exc:
        return type(exc), str(exc)


extras = st.builds(
    memory_record.Extras,
    tags=st.lists(st.text(min_size=1).filter(lambda t: "\n" not in t), max_size=3, unique=True).map(
        tuple
    ),
    expires_at=st.none() | st.floats(0, 2e9),
    links=st.lists(st.text("0123456789", min_size=3, max_size=3), max_size=3, unique=True)
    .map(sorted)
    .map(tuple),
)


@given(rows, extras)
def test_tags_expiry_and_links_round_trip(
    row: memory_record.MemoryRow, carried: memory_record.Extras
) -> None:
    got = memory_record.decode_memory_version(
        memory_record.encode_memory(row, extras=carried), row.id
    )
    assert (got.item, got.extras) == (row, carried)


def test_a_record_without_tags_expiry_or_links_has_none() -> None:
    row = memory_record.MemoryRow("0123456789abcdef", "t", "c", 0.5, 1.0, 0, None, "warm", 1.0)
    got = memory_record.decode_memory_version(memory_record.encode_memory(row))
    assert got.extras == memory_record.Extras()
    assert "tags" not in json.loads(memory_record.encode_memory(row))


def test_fields_the_decoder_does_not_know_are_ignored() -> None:
    row = memory_record.MemoryRow("0123456789abcdef", "t", "c", 0.5, 1.0, 0, None, "warm", 1.0)
    data = {**json.loads(memory_record.encode_memory(row)), "added_later": {"x": [1]}}
    payload = json.dumps(data).encode()
    assert memory_record.decode_memory_version(payload) == memory_record._general_memory(
        payload, None
    )
    assert memory_record.decode_memory(payload) == row


@pytest.mark.parametrize(
    ("field", "value"),
    [("tags", "a"), ("tags", [1]), ("tags", ["a\nb"]), ("expires_at", "soon"),
     ("expires_at", True), ("links", "abc"), ("links", ["0123456789abcdef"])],
)  # fmt: skip
def test_malformed_tags_expiry_or_links_are_damage(field: str, value: object) -> None:
    row = memory_record.MemoryRow("0123456789abcdef", "t", "c", 0.5, 1.0, 0, None, "warm", 1.0)
    data = {**json.loads(memory_record.encode_memory(row)), field: value}
    with pytest.raises(crypto.TamperedData):
        memory_record.decode_memory_version(json.dumps(data).encode())


@given(rows, extras, FIELDS, ODD_VALUES | st.just(...), st.booleans())
def test_the_fast_memory_decoder_agrees_with_the_checked_one(
    row: memory_record.MemoryRow,
    carried: memory_record.Extras,
    field: str,
    value: object,
    tombstone: bool,
) -> None:
    item = memory_record.Tombstone(row.id) if tombstone else row
    data = json.loads(memory_record.encode_memory(item, extras=carried))
    if value is ...:
        data.pop(field, None)
    else:
        data[field] = value
    payload = json.dumps(data).encode()
    fast = _outcome(memory_record.decode_memory_version, payload)
    assert fast == _outcome(memory_record._general_memory, payload)


@given(
    st.sampled_from(["device", "n", "records", "seen", "format", "line", "table"]),
    ODD_VALUES | st.just(...),
)
def test_the_fast_manifest_decoder_agrees_with_the_checked_one(field: str, value: object) -> None:
    line = ["memory", "ab" * 16, VERSION, "cd" * 32]
    data: dict[str, object] = {
        "format": 1,
        "device": DEVICE.hex(),
        "n": 3,
        "records": [line, ["metrics", "ef" * 16, VERSION, "01" * 32]],
        "seen": {"11" * 16: 2},
    }
    if field in ("line", "table"):
        line[0 if field == "table" else 2] = None if value is ... else value  # type: ignore[call-overload]
    elif value is ...:
        data.pop(field)
    else:
        data[field] = value
    payload = json.dumps(data).encode()
    for device in (None, DEVICE.hex()):
        fast = _outcome(manifest.decode_manifest, payload, device)
        assert fast == _outcome(manifest._general_manifest, payload, device)


def test_a_memory_core_would_reject_is_damage() -> None:
    good = memory_record.MemoryRow("0123456789abcdef", "t", "c", 0.5, 1.0, 0, None, "warm", 1.0)
    data = json.loads(memory_record.encode_memory(good))
    for field, value in (("importance", 1.5), ("importance", -0.1), ("access_count", -1)):
        bad = json.dumps({**data, field: value}).encode()
        with pytest.raises(crypto.TamperedData):
            memory_record.decode_memory(bad)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(crypto.UnsupportedFormat):
        memory_record.decode_memory(b'{"format": 9, "id": "a", "deleted": true}')


def test_manifests_round_trip() -> None:
    m = manifest.Manifest(
        "ab" * 16,
        3,
        (manifest.ManifestEntry(records.MEMORY_TABLE, "00" * 16, VERSION, "ff" * 32),),
    )
    assert manifest.decode_manifest(manifest.encode_manifest(m), "ab" * 16) == m
    with pytest.raises(crypto.TamperedData):
        manifest.decode_manifest(manifest.encode_manifest(m), "cd" * 16)
    compact = json.loads(manifest.encode_manifest(m))
    assert compact["format"] == 2 and compact["version"] == VERSION and "records" not in compact
    raw = bytearray(base64.b64decode(compact["lines"]))
    raw[0] = 200  # no such table
    with pytest.raises(crypto.TamperedData):
        manifest.decode_manifest(
            json.dumps({**compact, "lines": base64.b64encode(raw).decode()}).encode()
        )
    with pytest.raises(crypto.TamperedData):  # a line cut short
        manifest.decode_manifest(
            json.dumps({**compact, "lines": base64.b64encode(raw[:-1]).decode()}).encode()
        )
    # the first format (vaults pushed before the compact one) still decodes, and is checked
    line = ["memory", "00" * 16, VERSION, "ff" * 32]
    first = {"format": 1, "device": m.device, "n": 3, "records": [line]}
    assert manifest.decode_manifest(json.dumps(first).encode(), "ab" * 16) == m
    line[0] = "secrets"
    with pytest.raises(crypto.TamperedData):
        manifest.decode_manifest(json.dumps(first).encode())


def test_a_compact_manifest_is_under_half_the_size_of_the_first_format() -> None:
    entries = tuple(
        manifest.ManifestEntry(records.MEMORY_TABLE, f"{n:032x}", VERSION, f"{n:064x}")
        for n in range(100)
    )
    m = manifest.Manifest("ab" * 16, 1, entries)
    first = json.dumps(
        {
            "format": 1,
            "device": m.device,
            "n": 1,
            "records": [[e.table, e.record_id, e.version, e.digest] for e in entries],
        }
    )
    assert len(manifest.encode_manifest(m)) * 2 < len(first)
    assert manifest.decode_manifest(manifest.encode_manifest(m)) == m


def test_sealed_rows_open_only_as_their_table_and_id() -> None:
    rid = records.record_id(KEY, records.MEMORY_TABLE, "0123456789abcdef")
    assert rid != records.record_id(KEY, records.CRITICAL_TABLE, "0123456789abcdef")
    payload = memory_record.encode_memory(memory_record.Tombstone("0123456789abcdef"))
    env = records.seal(KEY, 1, "agent", records.MEMORY_TABLE, rid, VERSION, DEVICE, payload)
    assert len(env) == crypto.ENVELOPE_HEADER_LEN + records.MEMORY_BUCKET + 16
    row = records.RemoteRow(1, rid, VERSION, 1, DEVICE, env)
    assert records.open_row(KEY, "agent", records.MEMORY_TABLE, row) == payload
    with pytest.raises(crypto.TamperedData):
        records.open_row(KEY, "agent", records.CRITICAL_TABLE, row)
    with pytest.raises(crypto.TamperedData):
        records.open_row(
            KEY, "agent", records.MEMORY_TABLE, records.RemoteRow(1, rid, VERSION, 2, DEVICE, env)
        )
    with pytest.raises(crypto.TamperedData):
        records.remote_row((1, rid, VERSION, "1", DEVICE, env))
    assert records.envelope_digest(env) == records.envelope_digest(bytes(env))
    with pytest.raises(ValueError):
        records.record_id(KEY, "secrets", "x")


def test_critical_documents_belong_to_their_agent() -> None:
    plain = records.encode_critical({"format": 2, "agent_id": "a", "hot": {}})
    assert records.decode_critical(plain, "a")["format"] == 2
    with pytest.raises(crypto.TamperedData):
        records.decode_critical(plain, "b")


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), _JSON))
def test_a_record_body_holds_what_sorted_json_dumps_holds(data: dict[str, object]) -> None:
    """Bodies are encoded by msgspec: the same values `json.dumps(sort_keys=True)` gives, keys
    sorted, compact, UTF-8 (control characters, quotes and any text survive)."""
    body = records.canonical(data)
    reference = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert json.loads(body) == json.loads(reference) == data
    assert list(json.loads(body)) == sorted(data)
    if "e+" not in reference and "e-0" not in reference:  # a float's exponent: sign, zeros
        assert body == reference.encode()
