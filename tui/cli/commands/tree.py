"""`tiermem tree`: show or edit the category tree index."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import click

from tiermem.core.errors import InvalidInput
from tiermem.core.tree import TreeIndex
from tiermem.tui.cli.options import Options, emit, pass_options


@click.command()
@click.option("--show", is_flag=True, help="Print the tree (the default).")
@click.option("--add", nargs=2, metavar="PATH DESC", help="Add a category node.")
@click.option("--remove", metavar="PATH", help="Remove a node that holds no memories.")
@click.option("--prune", is_flag=True, help="Remove nodes idle for 60+ days.")
@pass_options
def tree(
    opts: Options, show: bool, add: tuple[str, str] | None, remove: str | None, prune: bool
) -> None:
    """Show or edit the category tree index."""
    if sum(x is not None and x is not False for x in (add, remove, prune)) > 1:
        raise InvalidInput("give one tree edit at a time")
    payload: dict[str, Any] = {}
    with opts.open(create=add is not None) as mem:
        if add is not None:
            payload["added"] = mem.tree_add(add[0], add[1]).path
        elif remove is not None:
            payload["removed"] = mem.tree_remove(remove)
        elif prune:
            payload["removed"] = mem.tree_prune()
        index = mem.tree()
    payload |= tree_payload(index)
    emit(opts, payload, lambda: render_tree(index, payload))


def tree_payload(index: TreeIndex) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "path": n.path,
                "description": n.description,
                "warm": n.warm,
                "cold": n.cold,
                "last_activity": n.last_activity,
            }
            for _, n in sorted(index.nodes.items())
        ],
        "root": {"warm": index.root_warm, "cold": index.root_cold},
        "node_count": len(index.nodes),
        "max_nodes": index.cfg.max_nodes,
        "bytes": index.size_bytes(),
        "max_bytes": index.cfg.max_bytes,
    }


def render_tree(index: TreeIndex, payload: dict[str, Any]) -> str:
    lines = []
    if payload.get("added"):
        lines.append(f"added {payload['added']}")
    if "removed" in payload:
        lines.append("removed " + (", ".join(payload["removed"]) or "nothing"))
    lines.append(f"Root (warm {index.root_warm}, cold {index.root_cold})")

    def walk(path: str, depth: int) -> Iterator[str]:
        for child in index.children(path):
            node = index.nodes[child]
            name = child.rpartition("/")[2]
            yield f"{'  ' * depth}{name} — {node.description} (warm {node.warm}, cold {node.cold})"
            yield from walk(child, depth + 1)

    lines += walk("", 1)
    lines.append(
        f"{len(index.nodes)}/{index.cfg.max_nodes} nodes · "
        f"{index.size_bytes()}/{index.cfg.max_bytes} bytes"
    )
    return "\n".join(lines)
