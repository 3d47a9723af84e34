"""The crash-test child: a mixed workload on one memory home that acknowledges each write.

Run as a script (`python crash_child.py HOME SEED ROUND`); the parent SIGKILLs it at a random
moment. Protocol on stdout, one JSON line each, flushed:

- ``{"ready": true}`` once the home is open (migrations done);
- ``{"begin": {...op}}`` before an operation starts;
- ``{"ack": {...op, result}}`` after it returned, i.e. after its transaction committed.

Only what was acknowledged must survive a kill; the one operation begun and not acknowledged
may or may not have happened. The shipped driver (libSQL) is used: TIERMEM_DRIVER is cleared.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

os.environ.pop("TIERMEM_DRIVER", None)

from tiermem.core.engine import Memory
from tiermem.core.errors import LimitExceeded, NotFound
from tiermem.core.tokens import count_tokens

CATEGORIES = ("work/alpha", "work/beta", "personal", "projects/evoclaw/bsc", "tools")
WORDS = ("deploy", "testnet", "oolong", "deadline", "kumquat", "zebra", "pangolin", "quokka")
OPS = {
    "store": 30,
    "retrieve": 15,
    "identity": 10,
    "event": 10,
    "lesson": 5,
    "task": 5,
    "complete": 3,
    "tree_add": 8,
    "tree_remove": 5,
    "consolidate": 4,
}


def send(**message: Any) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(home: str, seed: int, round_no: int) -> None:
    rng = random.Random(seed * 100_003 + round_no)
    mem = Memory(Path(home), "default")
    count_tokens("warm up")  # the tokenizer loads once; kills should land in the workload
    send(ready=True)
    counter = int(mem.hot().identity.get("counter", 0))
    names, weights = list(OPS), list(OPS.values())
    for i in range(100_000):
        kind = rng.choices(names, weights)[0]
        tag = f"r{round_no}n{i}"
        op: dict[str, Any] = {"kind": kind, "tag": tag}
        if kind == "store":
            op["text"] = f"fact {tag} about {rng.choice(WORDS)} and {rng.choice(WORDS)}"
            op["category"] = rng.choice(CATEGORIES)
            op["importance"] = round(rng.random(), 3)
        elif kind == "retrieve":
            op["query"] = rng.choice(WORDS)
        elif kind == "identity":
            op["counter"] = counter + 1
        elif kind == "event":
            op["text"] = f"event {tag}"
        elif kind == "lesson":
            op["text"] = f"lesson {tag} {rng.choice(WORDS)}"
        elif kind == "task":
            op["text"] = f"task {tag}"
        elif kind == "tree_add":
            op["path"] = f"scratch/{tag}"
        elif kind == "tree_remove":
            scratch = sorted(p for p in mem.trees.load().nodes if p.startswith("scratch/"))
            if not scratch:
                continue
            op["path"] = rng.choice(scratch)
        elif kind == "consolidate":
            op["mode"] = rng.choice(("quick", "quick", "daily"))
        send(begin=op)
        op["result"] = run(mem, op)
        if kind == "identity":
            counter += 1
        send(ack=op)


def run(mem: Memory, op: dict[str, Any]) -> Any:
    kind = op["kind"]
    if kind == "store":
        return mem.store(op["text"], op["category"], op["importance"]).id
    if kind == "retrieve":  # acknowledged once its reinforcement is written
        hits = [h.memory.id for h in mem.retrieve(op["query"], limit=3).hits]
        mem.flush_reinforcement()
        return hits
    if kind == "identity":
        mem.update_hot("identity", {"counter": op["counter"]})
    elif kind in ("event", "lesson", "task"):
        try:
            if kind == "event":
                mem.add_event(op["text"])
            elif kind == "lesson":
                mem.add_lesson(op["text"], 0.6)
            else:
                mem.add_task(op["text"])
        except LimitExceeded:  # hot memory is full of more important items: nothing changed
            return "refused"
    elif kind == "complete":
        tasks = mem.hot().active_context.tasks
        if not tasks:
            return "none"
        return f"Done: {mem.complete_task(tasks[0].id)[0].text}"
    elif kind == "tree_add":
        try:
            mem.tree_add(op["path"], "scratch node")
        except LimitExceeded:
            return "refused"
    elif kind == "tree_remove":
        try:
            mem.tree_remove(op["path"])
        except NotFound:
            return "gone"
    elif kind == "consolidate":
        mem.consolidate(op["mode"])
    return "ok"


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
