"""Merging critical documents per item and field by HLC (tiermem.sync.kinds.critical_merge, pure part).

Documents are built by a small device simulator: each edit changes the hot state or the tree
with the real `HotStore` edits and restamps exactly as `core.clocks.stamp` does on a device.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tiermem.core import clocks, snapshot
from tiermem.core.config import HotConfig, TreeConfig
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.hot import HotState, HotStore
from tiermem.core.tree import ancestors
from tiermem.sync import hlc
from tiermem.sync.kinds.critical_merge import (
    REASON_DELETED,
    REASON_HOT_LIMIT,
    REASON_PARENT,
    REASON_TREE_LIMIT,
    merge_documents,
)

BASE, PHONE, DESK, LAPTOP = "00" * 16, "aa" * 16, "dd" * 16, "ee" * 16
T0 = 1_767_225_600_000  # ms
Nodes = dict[str, tuple[str, float, float]]


def empty(agent: str = "claw") -> dict[str, Any]:
    return {
        "format": snapshot.DOCUMENT_FORMAT,
        "agent_id": agent,
        "hot": snapshot.canonical_hot(HotState()),
        "tree": [],
        "clocks": {},
        "seen": {},
        "conflicts": [],
    }


def edit(
    doc: dict[str, Any], device: str, now_ms: int, change: Callable[[HotState, Nodes], None]
) -> dict[str, Any]:
    """`change` on a device holding `doc`, stamped like `core.clocks.stamp`."""
    hot, rows = snapshot.parse(doc)
    nodes: Nodes = {p: (d, c, last) for p, d, c, last in rows}
    old = clocks.item_values(hot, [(p, v[0]) for p, v in nodes.items()])
    full = snapshot.clock_table(doc, hot, rows)
    table = {item: {f: clocks.split_version(v) for f, v in fs.items()} for item, fs in full.items()}
    stored = clocks.field_digests(old, table)
    change(hot, nodes)
    hot.updated_at = max(hot.updated_at, now_ms / 1000)
    todo, drop = clocks.changes(
        clocks.item_values(hot, [(p, v[0]) for p, v in nodes.items()]), stored
    )
    out = copy.deepcopy(doc)
    if todo or drop:
        last = max((clocks.split_version(v)[0] for v in doc["seen"].values()), default=None)
        version = clocks.version(clocks.next_stamp(last, now_ms), device)
        for item, fld, _ in todo:
            full.setdefault(item, {})[fld] = version
        for item, fld in drop:
            full[item].pop(fld)
        out["seen"][device] = version
    values = clocks.item_values(hot, [(p, v[0]) for p, v in nodes.items()])
    out["clocks"] = clocks.compact(full, values)
    out["hot"] = snapshot.canonical_hot(hot)
    out["tree"] = [
        {"path": p, "description": d, "created_at": c, "last_activity": last}
        for p, (d, c, last) in sorted(nodes.items())
    ]
    return out


# -- operations a device can do --------------------------------------------------------------

Op = tuple[Any, ...]


def apply(doc: dict[str, Any], device: str, now_ms: int, op: Op) -> dict[str, Any]:
    now = now_ms / 1000
    name, *args = op

    def change(hot: HotState, nodes: Nodes) -> None:
        if name == "map":
            HotStore.update_mapping(hot, args[0], {args[1]: args[2]})
        elif name == "lesson":
            HotStore.add_lesson(hot, f"lesson {args[0]}", args[1], "general", now)
        elif name == "task":
            HotStore.add_task(hot, f"task {args[0]}", now, args[1])
        elif name == "project":
            HotStore.upsert_project(hot, f"project {args[0]}", args[1], "", now)
        elif name == "event":
            HotStore.add_event(hot, f"event {args[0]}", now)
        elif name == "remove":
            with contextlib.suppress(NotFound):
                HotStore.remove_item(hot, f"{args[0]} {args[1]}")
        elif name == "tree":
            for path in ancestors(args[0]):
                if path not in nodes:
                    nodes[path] = (path, now, now)
            nodes[args[0]] = (args[1], nodes[args[0]][1], now)
        elif name == "untree":
            for path in [p for p in nodes if p == args[0] or p.startswith(args[0] + "/")]:
                del nodes[path]

    return edit(doc, device, now_ms, change)


VALUES = st.sampled_from(["a", "b", "c"])
OPS = st.one_of(
    st.tuples(
        st.just("map"),
        st.sampled_from(["identity", "owner_profile"]),
        st.sampled_from(["name", "tz"]),
        st.one_of(st.none(), VALUES),
    ),
    st.tuples(st.just("lesson"), st.integers(0, 2), st.sampled_from([0.5, 0.9])),
    st.tuples(st.just("task"), st.integers(0, 2), st.sampled_from(["pending", "doing"])),
    st.tuples(st.just("project"), st.integers(0, 1), VALUES),
    st.tuples(st.just("event"), st.integers(0, 2)),
    st.tuples(st.just("remove"), st.sampled_from(["lesson", "task", "project"]), st.integers(0, 2)),
    st.tuples(st.just("tree"), st.sampled_from(["a", "a/b", "a/c", "b"]), VALUES),
    st.tuples(st.just("untree"), st.sampled_from(["a", "a/b", "b"])),
)
STEPS = st.lists(st.tuples(OPS, st.integers(0, 3)), max_size=8)


def run(
    doc: dict[str, Any], device: str, start_ms: int, steps: list[tuple[Op, int]]
) -> dict[str, Any]:
    now = start_ms
    for op, dt in steps:
        now += dt
        doc = apply(doc, device, now, op)
    return doc


def fork(base: list[tuple[Op, int]], *sides: list[tuple[Op, int]]) -> list[dict[str, Any]]:
    """A common history on one device, then each side's edits on its own device."""
    common = run(empty(), BASE, T0, base)
    devices = [PHONE, DESK, LAPTOP]
    return [run(common, devices[i], T0 + 10, steps) for i, steps in enumerate(sides)]


def without_conflicts(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "conflicts"}


# -- the laws --------------------------------------------------------------------------------

LAWS = settings(max_examples=150, deadline=None, database=None)


@LAWS
@given(base=STEPS, one=STEPS, two=STEPS)
def test_commutative_and_deterministic(base, one, two) -> None:
    a, b = fork(base, one, two)
    ab, ba = merge_documents(a, b), merge_documents(b, a)
    assert ab == ba
    assert snapshot.canonical(ab.merged) == snapshot.canonical(ba.merged)
    assert merge_documents(copy.deepcopy(a), copy.deepcopy(b)) == ab


@LAWS
@given(base=STEPS, one=STEPS, two=STEPS)
def test_idempotent_and_stable(base, one, two) -> None:
    a, b = fork(base, one, two)
    assert merge_documents(a, a).merged == a and merge_documents(a, a).conflicts == []
    merged = merge_documents(a, b).merged
    again = merge_documents(merged, merged)
    assert again.merged == merged and again.conflicts == []
    # merging either input into the result changes nothing and finds nothing new
    for side in (a, b):
        result = merge_documents(merged, side)
        assert result.merged == merged and result.conflicts == []


@LAWS
@given(base=STEPS, one=STEPS, two=STEPS, three=STEPS)
def test_associative_without_pruning(base, one, two, three) -> None:
    """The state is associative unless a delete raced an edit of the same item or a merge had
    to repair the state (a parent brought back, an item pruned): a tombstone keeps no field
    values, and a repair works on one merged state, so another grouping can end with another
    (equally recorded) value; exchanging the results still converges, as the merge is
    commutative and idempotent.
    The conflict records may differ (which of two equal losing writes is named depends on the
    grouping), but in both groupings nothing written is lost."""
    a, b, c = fork(base, one, two, three)
    left = merge_documents(merge_documents(a, b).merged, c).merged
    right = merge_documents(a, merge_documents(b, c).merged).merged
    final = merge_documents(left, right).merged  # the two groupings meet: they converge
    assert merge_documents(final, left).merged == final == merge_documents(right, final).merged
    repaired = {REASON_DELETED, REASON_PARENT, REASON_TREE_LIMIT, REASON_HOT_LIMIT}
    assume(not any(r["reason"] in repaired for r in left["conflicts"] + right["conflicts"]))
    assert without_conflicts(left) == without_conflicts(right)
    assert_nothing_lost(left, [a, b, c])
    assert_nothing_lost(right, [a, b, c])


def _written(doc: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    """(item, field, version, value or None) of every clocked field of a document."""
    hot, rows = snapshot.parse(doc)
    values = clocks.item_values(hot, [(r[0], r[1]) for r in rows])
    out = []
    for item, fields in snapshot.clock_table(doc, hot, rows).items():
        for fld, version in fields.items():
            present = values.get(item)
            if present is None:
                value = None
            elif fld == clocks.ALIVE and item not in clocks.MAPPINGS:
                value = present
            else:
                value = present.get(fld)
            out.append((item, fld, version, value))
    return out


@LAWS
@given(base=STEPS, one=STEPS, two=STEPS)
def test_nothing_written_is_silently_lost(base, one, two) -> None:
    """Every value either side wrote that the other had not seen is in the merged document
    or in a conflict record (its lost value, or the whole lost item)."""
    a, b = fork(base, one, two)
    assert_nothing_lost(merge_documents(a, b).merged, [a, b])


def assert_nothing_lost(merged: dict[str, Any], docs: list[dict[str, Any]]) -> None:
    """Every write no other document had seen is in `merged` or in one of its records."""
    now = {(i, f): v for i, f, _, v in _written(merged)}
    alive = {i for i, f, _, v in _written(merged) if f == clocks.ALIVE and v is not None}
    records = merged["conflicts"]
    for doc in docs:
        others = [d for d in docs if d is not doc]
        for item, fld, version, value in _written(doc):
            _, device = clocks.split_version(version)
            if any(o["seen"].get(device, "") >= version for o in others):
                continue  # another side had seen it: overwriting it was an update
            if fld == clocks.ALIVE and item not in clocks.MAPPINGS:
                if (item in alive) == (value is not None):
                    continue
                if isinstance(value, dict):
                    continue  # a lost item: its fields are written (and checked) one by one
            elif now.get((item, fld)) == value and (item in clocks.MAPPINGS or item in alive):
                continue
            assert recorded(records, item, fld, value), (item, fld, version, value, records)


def recorded(records: list[dict[str, Any]], item: str, fld: str, value: Any) -> bool:
    """A record keeps `value` of `item`'s field: as that field, or inside a lost item."""
    return any(
        r["item"] == item
        and (
            (r["field"] == fld and r["lost"] == value)
            or (
                r["field"] == clocks.ALIVE
                and isinstance(r["lost"], dict)
                and r["lost"].get(fld) == value
            )
        )
        for r in records
    )


@LAWS
@given(base=STEPS, one=STEPS, two=STEPS)
def test_merged_versions_are_hlcs_and_cover_the_seen_vector(base, one, two) -> None:
    a, b = fork(base, one, two)
    merged = merge_documents(a, b).merged
    hot, rows = snapshot.parse(merged)
    for fields in snapshot.clock_table(merged, hot, rows).values():
        for version in fields.values():
            parsed = hlc.parse(version)
            assert merged["seen"][parsed.device] >= version


# -- cases ------------------------------------------------------------------------------------


def test_concurrent_edits_keep_the_later_and_record_the_other() -> None:
    a, b = fork(
        [(("map", "identity", "name", "Claw"), 0)],
        [(("map", "identity", "name", "P"), 5)],
        [(("map", "identity", "name", "D"), 9)],
    )
    result = merge_documents(a, b)
    assert result.merged["hot"]["identity"] == {"name": "D"}
    [record] = result.conflicts
    assert (record["kept"], record["lost"], record["lost_device"]) == ("D", "P", PHONE)
    assert result.merged["conflicts"] == [record]


def test_a_sequential_update_is_not_a_conflict() -> None:
    [a] = fork([(("map", "identity", "name", "Claw"), 0)], [])
    b = apply(merge_documents(a, empty()).merged, DESK, T0 + 50, ("map", "identity", "name", "D"))
    result = merge_documents(a, b)
    assert result.merged["hot"]["identity"] == {"name": "D"} and result.conflicts == []


@pytest.mark.parametrize("edit_later", [True, False])
def test_delete_against_edit_is_decided_by_time_and_the_loser_kept(edit_later: bool) -> None:
    base = [(("lesson", 1, 0.5), 0)]
    delete = [(("remove", "lesson", 1), 20)]
    change = [(("lesson", 1, 0.9), 30 if edit_later else 10)]
    a, b = fork(base, delete, change)
    result = merge_documents(a, b)
    lessons = result.merged["hot"]["critical_lessons"]
    [record] = result.conflicts
    assert record["field"] == clocks.ALIVE and record["reason"] == REASON_DELETED
    if edit_later:
        assert [x["importance"] for x in lessons] == [0.9]
        assert record["lost"] is None and record["lost_device"] == PHONE
    else:
        assert lessons == []
        assert record["lost"]["importance"] == 0.9 and record["kept"] is None


def test_a_plain_delete_propagates_without_conflict() -> None:
    a, b = fork([(("task", 0, "pending"), 0)], [(("remove", "task", 0), 5)], [])
    result = merge_documents(a, b)
    assert result.merged["hot"]["active_context"]["tasks"] == [] and result.conflicts == []


def test_a_node_added_under_a_deleted_parent_brings_the_parent_back() -> None:
    a, b = fork([(("tree", "a", "A"), 0)], [(("untree", "a"), 5)], [(("tree", "a/new", "N"), 9)])
    result = merge_documents(a, b)
    assert [n["path"] for n in result.merged["tree"]] == ["a", "a/new"]
    assert [r["reason"] for r in result.conflicts] == [REASON_PARENT]
    assert merge_documents(result.merged, a).merged == result.merged


def test_hot_limits_hold_after_a_merge_and_the_pruned_are_recorded() -> None:
    one = [(("lesson", i, 0.5), 1) for i in range(12)]
    two = [(("lesson", 100 + i, 0.6), 1) for i in range(12)]
    a, b = fork([], one, two)
    result = merge_documents(a, b, HotConfig())
    lessons = result.merged["hot"]["critical_lessons"]
    assert len(lessons) == HotConfig().max_lessons
    pruned = [r for r in result.conflicts if r["reason"] == REASON_HOT_LIMIT]
    assert len(pruned) == 24 - HotConfig().max_lessons
    assert all(r["lost"]["importance"] == 0.5 for r in pruned)  # lowest importance goes first
    assert merge_documents(b, a) == result
    assert merge_documents(result.merged, a).merged == result.merged


def test_a_merge_over_the_size_limit_keeps_critical_lessons_and_moves_projects_first() -> None:
    critical = [(("lesson", 1, 0.95), 1)]
    projects = [(("project", i, "status " * 40), 1) for i in range(2)]
    a, b = fork([], critical, projects)
    whole = merge_documents(a, b, HotConfig()).merged["hot"]
    size = len(msgspec.json.encode(whole))
    cfg = HotConfig(max_bytes=size - 50)  # one project has to go, or the lesson would
    result = merge_documents(a, b, cfg)
    assert [x["importance"] for x in result.merged["hot"]["critical_lessons"]] == [0.95]
    pruned = [r for r in result.conflicts if r["reason"] == REASON_HOT_LIMIT]
    assert pruned and all("lesson" not in str(r["item"]) for r in pruned)
    assert merge_documents(b, a, cfg) == result


def test_tree_limits_hold_after_a_merge_and_the_pruned_are_recorded() -> None:
    cfg = TreeConfig()
    one = [(("tree", f"p{i}", "x"), 1) for i in range(7)]
    two = [(("tree", f"d{i}", "x"), 1) for i in range(7)]
    a, b = fork([], one, two)
    result = merge_documents(a, b, tree_cfg=cfg)
    assert len(result.merged["tree"]) == cfg.max_children
    pruned = [r for r in result.conflicts if r["reason"] == REASON_TREE_LIMIT]
    assert len(pruned) == 14 - cfg.max_children
    assert merge_documents(b, a, tree_cfg=cfg) == result


def test_resolved_on_either_side_is_resolved() -> None:
    a, b = fork(
        [(("map", "identity", "name", "x"), 0)],
        [(("map", "identity", "name", "P"), 5)],
        [(("map", "identity", "name", "D"), 9)],
    )
    merged = merge_documents(a, b).merged
    closed = copy.deepcopy(merged)
    closed["conflicts"][0]["resolved"] = True
    assert merge_documents(merged, closed).merged["conflicts"][0]["resolved"] is True
    assert merge_documents(closed, merged).merged["conflicts"][0]["resolved"] is True


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"format": 1, "agent_id": "claw", "hot": {}, "tree": []},
        {**empty(), "clocks": {"identity": {"name": "not a version"}}},
        {**empty(), "seen": 5},
        {**empty(), "clocks": {"lesson/x": 5}},
        {**empty(), "clocks": {"identity": "000001767225600010.000000." + PHONE}},
        {**empty(), "clocks": {"gizmo/x": "000001767225600010.000000." + PHONE}},
        {**empty(), "hot": {"identity": 3}},
    ],
)
def test_malformed_documents_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        merge_documents(empty(), bad)


def test_documents_of_different_agents_do_not_merge() -> None:
    with pytest.raises(InvalidInput, match="different agents"):
        merge_documents(empty("one"), empty("two"))


def test_result_unpacks_as_a_pair() -> None:
    merged, found = merge_documents(empty(), empty())
    assert merged == empty() and found == []
    assert msgspec.json.decode(snapshot.canonical(merged)) == merged
