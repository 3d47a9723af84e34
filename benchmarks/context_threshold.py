"""Precision of `context` injection on the hand-labelled set in tests/fixtures, per threshold.

    .venv/bin/python -m benchmarks.context_threshold [--thresholds 0,0.1,...]

The set's memories are stored in a fresh home; each message is asked through `build_context`
(the trivial-message filter on, as in use). Per threshold: precision (injected memories that
are labelled relevant / all injected), recall (relevant memories injected / all labelled),
and how many unrelated messages got any memory at all.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from tiermem.core.context import build_context
from tiermem.core.engine import Memory

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "context_relevance.json"


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def measure(
    mem: Memory, ids: dict[str, str], data: dict[str, Any], threshold: float
) -> dict[str, float]:
    """Precision, recall and unrelated messages served a memory, at one threshold."""
    injected = relevant_injected = labelled = noisy = 0
    for message in data["messages"]:
        block = build_context(mem, message["text"], threshold=threshold)
        got = set(block.memory_ids)
        wanted = {ids[k] for k in message["relevant"]}
        injected += len(got)
        relevant_injected += len(got & wanted)
        labelled += len(wanted)
        if not wanted and got:
            noisy += 1
    return {
        "threshold": threshold,
        "precision": relevant_injected / injected if injected else 1.0,
        "recall": relevant_injected / labelled if labelled else 1.0,
        "unrelated_with_injection": noisy,
        "injected": injected,
    }


def run(thresholds: list[float]) -> list[dict[str, float]]:
    data = load()
    with (
        tempfile.TemporaryDirectory(prefix="tiermem-ctx-") as tmp,
        Memory(Path(tmp) / "home", "bench") as mem,
    ):
        ids = {
            key: mem.store(text, category).id for key, (text, category) in data["memories"].items()
        }
        return [measure(mem, ids, data, t) for t in thresholds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--thresholds", default="0,0.1,0.2,0.25,0.3,0.35,0.4,0.5,0.6,0.7")
    args = parser.parse_args()
    data = load()
    unrelated = sum(1 for m in data["messages"] if not m["relevant"])
    print(
        f"{len(data['messages'])} messages ({unrelated} unrelated), {len(data['memories'])} memories"
    )
    print("threshold  precision  recall  unrelated messages served  memories injected")
    for row in run([float(x) for x in args.thresholds.split(",")]):
        print(
            f"{row['threshold']:>9.2f}  {row['precision']:>9.2f}  {row['recall']:>6.2f}  "
            f"{int(row['unrelated_with_injection']):>10}/{unrelated}               {int(row['injected'])}"
        )


if __name__ == "__main__":
    main()
