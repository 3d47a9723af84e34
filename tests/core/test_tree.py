"""The tree index: limits after every operation, folding, remove-if-empty, prune, counts."""

from __future__ import annotations

import pytest

from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, LimitExceeded, NotFound
from tiermem.core.tree import normalize_path


def test_normalize_path() -> None:
    assert normalize_path(" Projects / EvoClaw /BSC ") == "projects/evoclaw/bsc"
    assert normalize_path("a//b/") == "a/b"
    for bad in ("", "/", " / ", "a/../b"):
        with pytest.raises(InvalidInput):
            normalize_path(bad)


def test_add_creates_ancestors(mem: Memory) -> None:
    mem.tree_add("projects/evoclaw/bsc", "BSC integration")
    nodes = mem.tree().nodes
    assert sorted(nodes) == ["projects", "projects/evoclaw", "projects/evoclaw/bsc"]
    assert nodes["projects/evoclaw/bsc"].description == "BSC integration"
    assert nodes["projects/evoclaw"].description == "Evoclaw"


def test_depth_limit(mem: Memory) -> None:
    mem.tree_add("a/b/c/d", "four deep")
    with pytest.raises(LimitExceeded, match="depth"):
        mem.tree_add("a/b/c/d/e", "five deep")


def test_children_limit(mem: Memory) -> None:
    for i in range(10):
        mem.tree_add(f"top/c{i}", "child")
    with pytest.raises(LimitExceeded, match="children"):
        mem.tree_add("top/c10", "one too many")


def test_node_limit(mem: Memory) -> None:
    for i in range(10):
        for j in range(4):
            mem.tree_add(f"t{i}/n{j}", "")
    assert len(mem.tree().nodes) == 50
    with pytest.raises(LimitExceeded, match="nodes"):
        mem.tree_add("t0/n9", "")


def test_size_limit(mem: Memory) -> None:
    for i in range(10):
        mem.tree_add(f"node{i}", "d" * 100)
    for i in range(10):
        try:
            mem.tree_add(f"node{i}/child", "e" * 100)
        except LimitExceeded as exc:
            assert "bytes" in str(exc)
            break
    else:
        pytest.fail("the 2 KB limit never triggered")
    assert mem.tree().size_bytes() <= 2048


def test_store_folds_into_allowed_ancestor(mem: Memory) -> None:
    outcome = mem.store("deep fact", "a/b/c/d/e/f", 0.5)
    assert outcome.category == "a/b/c/d/e/f"  # the memory keeps its full category
    tree = mem.tree()
    assert "a/b/c/d" in tree.nodes and "a/b/c/d/e" not in tree.nodes
    assert tree.node_for(outcome.category) == "a/b/c/d"
    assert tree.check() == []


def test_counts_are_subtree_inclusive(mem: Memory) -> None:
    mem.store("fact one", "projects/evoclaw", 0.5)
    mem.store("fact two", "projects/evoclaw/bsc", 0.5)
    mem.store("fact three", "owner", 0.5)
    tree = mem.tree()
    assert tree.nodes["projects"].warm == 2
    assert tree.nodes["projects/evoclaw/bsc"].warm == 1
    assert tree.root_warm == 3


def test_remove_only_if_empty(mem: Memory) -> None:
    mem.store("fact", "projects/evoclaw", 0.5)
    with pytest.raises(InvalidInput, match="only empty"):
        mem.tree_remove("projects")
    mem.tree_add("scratch/sub", "")
    assert mem.tree_remove("scratch") == ["scratch", "scratch/sub"]
    with pytest.raises(NotFound):
        mem.tree_remove("scratch")


def test_prune_removes_nodes_idle_60_days(mem: Memory, clock) -> None:
    mem.tree_add("old/topic", "")
    clock.advance(30)
    mem.tree_add("recent", "")
    clock.advance(31)
    assert mem.tree_prune() == ["old", "old/topic"]
    assert sorted(mem.tree().nodes) == ["recent"]


def test_prune_keeps_nodes_holding_warm_memories(mem: Memory, clock) -> None:
    mem.store("a warm fact", "keep/me", 0.5)
    clock.advance(61)
    assert mem.tree_prune() == []


def test_explicit_add_of_existing_updates_description(mem: Memory) -> None:
    mem.tree_add("owner", "Owner")
    mem.tree_add("owner", "Owner profile and preferences")
    assert mem.tree().nodes["owner"].description == "Owner profile and preferences"
