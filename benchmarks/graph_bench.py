"""Episodes and the knowledge graph, offline: extraction throughput and storage per conversation.

    .venv/bin/python -m benchmarks.graph_bench [--conversations 200]

The conversations are LongMemEval sessions (the `s` split, in file order; public data, MIT),
each one transcript of user and assistant turns. Measured on one fresh home:
- episodes/s: `episodes.write` alone (extractive summary, topics, abstract, the row);
- entities/s and texts/s: the offline extractor and the graph store over every turn
  (entities resolved, deduplicated, mentions recorded), counting each entity found in a text;
- storage per conversation: the whole `conversation-end` (facts, hot, episode, graph) on the
  same conversations in another home, the file's growth per conversation, and the share of it
  that the episode and graph tables take (measured by deleting them and vacuuming).
"""

from __future__ import annotations

import argparse
import lzma
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from tiermem.core import episodes, graph
from tiermem.core.engine import Memory
from tiermem.core.transcript import parse

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench" / "longmemeval_s_compact.json.xz"
TABLES = (
    "episodes",
    "entities",
    "entity_names",
    "relations",
    "mentions",
    "graph_progress",
    "graph_dirty",
)


def sessions(n: int) -> list[list[dict[str, Any]]]:
    with lzma.open(BENCH) as handle:
        data = msgspec.json.decode(handle.read())
    found = data["sessions"]
    values = found.values() if isinstance(found, dict) else found
    return [s for s in values if s][:n]


def transcript(session: list[dict[str, Any]]) -> str:
    return "\n".join(f"{t['role']}: {' '.join(str(t['content']).split())}" for t in session)


def db_bytes(mem: Memory) -> int:
    return int(mem.db.scalar("PRAGMA page_count")) * int(mem.db.scalar("PRAGMA page_size"))


def throughput(root: Path, talks: list[list[dict[str, Any]]]) -> dict[str, float]:
    with Memory(root / "extract", "bench") as mem:
        drafts = [
            episodes.Draft(
                f"s:{i}", [str(t["content"]) for t in s], ["user", "assistant"], [], 0.0, 0.0
            )
            for i, s in enumerate(talks)
        ]
        t0 = time.perf_counter()
        with mem.db.transaction():
            for draft in drafts:
                episodes.write(mem, draft)
        episode_s = time.perf_counter() - t0
        report = graph.IndexReport()
        store = graph.store_for(mem)
        found = 0
        t0 = time.perf_counter()
        with mem.db.transaction():
            for i, s in enumerate(talks):
                for j, turn in enumerate(s):
                    before = len(report.entities)
                    graph.index_text(store, str(turn["content"]), "memory", f"{i}:{j}", 0.0, report)
                    found += len(report.entities) - before
        graph_s = time.perf_counter() - t0
        entities, relations = store.count()
    return {
        "episodes_per_s": len(drafts) / episode_s,
        "texts_per_s": report.texts / graph_s,
        "entities_per_s": found / graph_s,
        "texts": report.texts,
        "distinct_entities": entities,
        "relations": relations,
    }


def storage(root: Path, talks: list[list[dict[str, Any]]]) -> dict[str, float]:
    with Memory(root / "storage", "bench") as mem:
        start = db_bytes(mem)
        for s in talks:
            text = transcript(s)
            mem.conversation_end(parse(text), text)
        total = db_bytes(mem) - start
        mem.db.execute("VACUUM")
        full = db_bytes(mem)
        for table in TABLES:
            mem.db.execute(f"DELETE FROM {table}")
        mem.db.execute("INSERT INTO episodes_fts (episodes_fts) VALUES ('rebuild')")
        mem.db.execute("VACUUM")
        without = db_bytes(mem)
    return {
        "bytes_per_conversation": total / len(talks),
        "episode_graph_bytes_per_conversation": (full - without) / len(talks),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=200)
    args = parser.parse_args()
    talks = sessions(args.conversations)
    with tempfile.TemporaryDirectory(prefix="tiermem-graph-") as tmp:
        speed = throughput(Path(tmp), talks)
        size = storage(Path(tmp), talks)
    turns = sum(len(s) for s in talks)
    print(f"{len(talks)} LongMemEval sessions ({turns} turns), offline")
    print(f"episodes written      {speed['episodes_per_s']:>9.0f} /s")
    print(
        f"graph extraction      {speed['texts_per_s']:>9.0f} texts/s, "
        f"{speed['entities_per_s']:.0f} entities/s "
        f"({speed['distinct_entities']:.0f} distinct entities, {speed['relations']:.0f} relations)"
    )
    print(
        f"storage               {size['bytes_per_conversation'] / 1024:>9.1f} KB per conversation "
        f"(conversation-end in all), of which episode + graph "
        f"{size['episode_graph_bytes_per_conversation'] / 1024:.1f} KB"
    )


if __name__ == "__main__":
    main()
