"""Sync cost as history and devices grow, against a real sqld (JWT auth) on loopback.

    python -m benchmarks.sync_scale --quick                 # 1k and 5k memories (CI, ~1-2 min)
    python -m benchmarks.sync_scale --levels 1000,10000,100000 --rtt 0.1

Device A stores memories in batches of 1,000 (one push each, with a small hot-state change),
then edits a fifth of each batch twice (a push after each round). Device B joined at the start
and catches up at every level; device C pulls at 90 % of each level, then at the level (offline
for the last 10 %). At each level: a pull of one change and a no-op pull (bytes and requests,
and whether a pull writes), the offline catch-up, the server's bytes per memory by kind, and a
full restore on loopback and at `--rtt` (added by the transport, round trips of requests in
flight together overlap). After the last level: the default prune and the storage it leaves,
then the next prune after more pushes twice: by A, which holds a copy of the checkpoint it
wrote, and by B, which holds none and downloads it. Then warm before cold: A moves its oldest
memories to cold but for every 20th (old warm memories that no push touches again), and the
restore at `--rtt` runs twice, newest first only (as before the lines said which records are
warm) and warm first: when the first memory and when every warm one is searchable. Then the
fan-out (B's pull after A's K hot-state pushes, against one) and a bounded many-device run. Prints the figures with the goals beside them and writes JSON to
benchmarks/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks import scale_devices
from benchmarks.agent_gen import generate
from benchmarks.scale_wire import Storage, Wire, storage
from benchmarks.sync_bench import fill_critical_state, small_hot_change
from tests.sync.sqld import INSTALL_COMMAND, SqldServer, sqld_binary
from tiermem.core.engine import Memory
from tiermem.core.warm import NewFact
from tiermem.sync import crypto
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import RestoreProgress, prefetch, prune, restore

AGENT = "scale"
YEAR = 365.25 * 86400
BATCH = 1000
EDIT_FRACTION = 0.2
OUT = Path(__file__).parent / "out"
TARGET_MEMORIES = 300_000
GOALS = {
    "fanout_ratio": 2.0,  # pull after K hot pushes by another device, in critical versions
    "manifest_share": 0.10,  # manifests' share of server bytes after the default prune
    "restore_download": 1.3,  # restore download over the vault's record bytes
    "restore_300k_s": 120.0,  # full restore of 300k memories at 100 ms RTT
    "usable_s": 10.0,  # restore usable at any size
}


class Vault:
    """Device A's home pushing to `server`, with its wire counter."""

    def __init__(self, tmp: Path, server: SqldServer, seed: int) -> None:
        self.tmp, self.server = tmp, server
        self.wire = Wire()
        self.mem = Memory(tmp / "A", AGENT)
        self.mem.update_hot("identity", {"agent_name": "Scale", "owner_name": "Sam"})
        self.key = crypto.generate_recovery_key()
        self.engine = SyncEngine(self.mem, timeout=120.0, transport=self.wire)
        self.engine.init(server.url, server.token, self.key, new_vault=True)
        self.engine.push()
        s = self.engine.require_ready()
        self.tag, self.id_key = s.tag, self.engine.id_key(s)
        self.facts: Iterator[NewFact] = generate(2_000_000, seed, time.time() - 5 * YEAR)
        self.batches = 0

    def count(self) -> int:
        return sum(self.mem.memories.counts().values())

    def warm(self) -> int:
        return int(self.mem.memories.counts().get("warm", 0))

    def grow_to(self, target: int) -> None:
        """Batches of new memories, each with a hot change, then two edit rounds."""
        while (have := self.count()) < target:
            outs = self.mem.store_many([next(self.facts) for _ in range(min(BATCH, target - have))])
            self.batches += 1
            self.mem.update_hot("identity", {"last_batch": f"batch {self.batches}"})
            self.engine.push()
            chosen = [o.id for o in outs if o.created][: int(len(outs) * EDIT_FRACTION)]
            for round_ in (1, 2):
                with self.mem.db.transaction():
                    self.mem.db.executemany(
                        "UPDATE memories SET importance = ? WHERE agent_id = ? AND id = ?",
                        [(0.3 + 0.2 * round_, AGENT, i) for i in chosen],
                    )
                self.engine.push()

    def storage(self) -> Storage:
        return storage(self.server, self.tag, self.id_key, AGENT)

    def join(self, name: str) -> tuple[SyncEngine, Wire]:
        """A device restored from the vault (enrolled like any other), with its own counter."""
        home = self.tmp / name
        restore(home, AGENT, self.server.url, self.server.token, recovery_key=self.key)
        wire = Wire()
        return SyncEngine(Memory(home, AGENT), timeout=120.0, transport=wire), wire


def measured_pull(engine: SyncEngine, wire: Wire) -> dict[str, Any]:
    before = wire.snapshot()
    started = time.perf_counter()
    result = engine.pull()
    used = wire.snapshot().minus(before)
    return {
        "s": time.perf_counter() - started,
        "applied": result.applied,
        "requests": used.requests,
        "down": used.down,
        "up": used.up,
        "writes": used.writes,
    }


def measured_restore(v: Vault, target: Path, rtt: float) -> dict[str, Any]:
    wire = Wire(rtt)
    warm = v.warm()
    started = time.perf_counter()
    searchable: list[float] = []
    all_warm: list[float] = []

    def progress(p: RestoreProgress) -> None:
        if p.searchable and not searchable:  # the first page of memories a search finds
            searchable.append(time.perf_counter() - started)
        if p.searchable >= warm and not all_warm:  # cold ones go live after every warm one
            all_warm.append(time.perf_counter() - started)

    result = restore(
        target,
        AGENT,
        v.server.url,
        v.server.token,
        recovery_key=v.key,
        transport=wire,
        timeout=120.0,
        progress=progress,
    )
    return {
        "s": result.seconds,
        "usable_s": result.usable_seconds,
        "searchable_s": searchable[0] if searchable else result.seconds,
        "warm_s": all_warm[0] if all_warm else result.seconds,
        "warm": warm,
        "memories": result.memories,
        "rows": result.rows,
        "record_bytes": result.memory_bytes,
        "requests": wire.counts.requests,
        "down": wire.counts.down,
    }


def level_run(
    v: Vault, level: int, b: tuple[SyncEngine, Wire], c: tuple[SyncEngine, Wire], rtt: float, i: int
) -> dict[str, Any]:
    """Grow to `level` and measure everything at it."""
    started = time.perf_counter()
    v.grow_to(int(level * 0.9))
    c[0].pull()  # C goes offline for the last 10 %
    v.grow_to(level)
    grow_s = time.perf_counter() - started
    out: dict[str, Any] = {"memories": v.count(), "grow_s": grow_s}
    out["catch_up"] = measured_pull(*b)
    v.mem.store(f"scale probe {i}: the quokka release moved to Thursday", "probe")
    v.engine.push()
    out["one_change"] = measured_pull(*b)
    out["no_op"] = measured_pull(*b)
    out["offline"] = measured_pull(*c)
    st = v.storage()
    out["storage"] = {"rows": st.rows, "bytes": st.envelope_bytes, "kinds": st.kinds}
    out["restore_loopback"] = measured_restore(v, v.tmp / f"restore-{level}-loop", 0.0)
    out["restore_rtt"] = measured_restore(v, v.tmp / f"restore-{level}-rtt", rtt)
    return out


def prune_run(v: Vault) -> dict[str, Any]:
    """The default prune (`[sync]` keep_versions and keep_days, as the daemon runs it)."""
    before = v.wire.snapshot()
    cfg = v.mem.cfg.sync
    result = prune(v.engine, cfg.keep_versions, keep_days=cfg.keep_days)
    used = v.wire.snapshot().minus(before)
    st = v.storage()
    # the checkpoint (the prune record's parts) is the manifests compacted: counted with them
    listing = st.bytes_of("manifest") + st.bytes_of("prune")
    return {
        "s": result.seconds,
        "deleted": result.deleted,
        "compacted": result.compacted,
        "requests": used.requests,
        "down": used.down,
        "storage": {"rows": st.rows, "bytes": st.envelope_bytes, "kinds": st.kinds},
        "manifest_share": listing / max(1, st.envelope_bytes),
        "restore_after": measured_restore(v, v.tmp / "restore-after-prune", 0.0),
    }


def next_prune_run(v: Vault, b: tuple[SyncEngine, Wire], memories: int) -> dict[str, Any]:
    """The next default prune after `memories` more memories, twice: by A (building on its
    copy of the checkpoint) and by B (no copy: it downloads the checkpoint, as every prune did
    before devices kept one)."""
    out: dict[str, Any] = {}
    for label, (engine, wire) in (("copy", (v.engine, v.wire)), ("download", b)):
        v.mem.store_many([next(v.facts) for _ in range(memories)])
        v.engine.push()
        checkpoint = v.storage().bytes_of("prune")
        before = wire.snapshot()
        cfg = v.mem.cfg.sync
        result = prune(engine, cfg.keep_versions, keep_days=cfg.keep_days)
        used = wire.snapshot().minus(before)
        out[label] = {
            "s": result.seconds,
            "previous": result.previous,
            "downloaded_because": result.downloaded_because,
            "compacted": result.compacted,
            "checkpoint_bytes": checkpoint,
            "requests": used.requests,
            "down": used.down,
        }
    return out


def warm_first_run(v: Vault, rtt: float) -> dict[str, Any]:
    """The oldest four fifths of A's memories moved to cold but for every 20th (old warm
    memories, never pushed again), then the restore at `rtt` newest first only and warm first."""
    ids = [
        str(r[0])
        for r in v.mem.db.query(
            "SELECT id FROM memories WHERE agent_id = ? ORDER BY created_at, rowid", (AGENT,)
        )
    ]
    archive = [i for n, i in enumerate(ids[: len(ids) * 4 // 5]) if n % 20]
    v.mem.memories.move(archive, "cold", v.mem.now())
    v.engine.push()
    out: dict[str, Any] = {"memories": v.count(), "warm": v.warm()}
    with (  # as before: no records fetched by id, the newest windows asked for at once
        mock.patch("tiermem.sync.restore.run.warm_records", lambda listed, at: []),
        mock.patch.object(prefetch, "EARLY_WINDOWS", prefetch.PAGES_IN_FLIGHT),
    ):
        out["newest_first"] = measured_restore(v, v.tmp / "restore-newest-first", rtt)
    out["warm_first"] = measured_restore(v, v.tmp / "restore-warm-first", rtt)
    return out


def fanout_run(tmp: Path, server: SqldServer, k: int) -> dict[str, Any]:
    """B's pull after A's K small hot-state pushes, against its pull after one."""
    key = crypto.generate_recovery_key()
    wire_a, wire_b = Wire(), Wire()
    with Memory(tmp / "fanA", "fan") as a, SyncEngine(a, transport=wire_a) as ea:
        fill_critical_state(a)
        ea.init(server.url, server.token, key, new_vault=True)
        ea.push()
        restore(tmp / "fanB", "fan", server.url, server.token, recovery_key=key)
        with Memory(tmp / "fanB", "fan") as b, SyncEngine(b, transport=wire_b) as eb:
            eb.pull()
            figures: dict[str, Any] = {}
            for label, pushes in (("one", 1), ("k", k)):
                for n in range(pushes):
                    small_hot_change(a, f"{label} conversation {n} ended")
                    ea.push()
                figures[label] = measured_pull(eb, wire_b)
            for n in range(k):
                a.store(f"fan-out probe {n}: the wombat cache was flushed", "probe")
                ea.push()
            figures["memories_k"] = measured_pull(eb, wire_b)
    figures["k_count"] = k
    figures["ratio"] = figures["k"]["down"] / max(1, figures["one"]["down"])
    return figures


def extrapolate(levels: list[dict[str, Any]], key: str, target: int) -> float:
    """Seconds at `target` memories on the line through the last two levels."""
    if len(levels) < 2:
        x = levels[-1]
        return float(x[key]["s"]) * target / max(1, int(x["memories"]))
    a, b = levels[-2], levels[-1]
    ta, tb = float(a[key]["s"]), float(b[key]["s"])
    slope = (tb - ta) / max(1, int(b["memories"]) - int(a["memories"]))
    return tb + slope * (target - int(b["memories"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sync_scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="1k and 5k memories, small runs")
    parser.add_argument("--levels", default="1000,10000,50000", help="memories at each level")
    parser.add_argument("--rtt", type=float, default=0.1, help="added round trip, seconds")
    parser.add_argument("--fanout", type=int, default=20, help="hot pushes before the pull")
    parser.add_argument("--devices", type=int, default=10, help="devices of the many-device run")
    parser.add_argument("--rounds", type=int, default=3, help="pushes per device between pulls")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.levels, args.fanout, args.devices, args.rounds = "1000,5000", 10, 4, 2
    levels = sorted({int(x) for x in args.levels.split(",")})
    if not sqld_binary().is_file():
        print(f"sqld is not installed; run:\n    {INSTALL_COMMAND}")
        return 2
    os.environ["TIERMEM_SECRET_STORE"] = "file"  # never the user's keyring
    report = run(levels, args)
    print_report(report)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"sync-scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"written to {path}")
    return 0


def say(what: str, started: float) -> None:
    load = os.getloadavg()[0]
    print(f"[{time.time() - started:6.1f} s, load {load:.2f}] {what}", file=sys.stderr)


def run(levels: list[int], args: argparse.Namespace) -> dict[str, Any]:
    started = time.time()
    report: dict[str, Any] = {"load_before": os.getloadavg()[0], "rtt": args.rtt, "levels": []}
    with tempfile.TemporaryDirectory(prefix="tiermem-sync-scale-") as tmp_:
        tmp = Path(tmp_)
        server = SqldServer(tmp / "sqld")
        server.start()
        try:
            v = Vault(tmp, server, args.seed)
            b = v.join("B")
            c = v.join("C")
            for i, level in enumerate(levels):
                say(f"growing to {level:,} memories and measuring", started)
                report["levels"].append(level_run(v, level, b, c, args.rtt, i))
            say("default prune", started)
            report["prune"] = prune_run(v)
            say("the next prune: with this device's copy of the checkpoint, and without", started)
            report["prune_next"] = next_prune_run(v, b, BATCH // 10)
            say("warm before cold: old warm memories under a cold archive", started)
            report["warm_first"] = warm_first_run(v, args.rtt)
            say(f"fan-out ({args.fanout} hot pushes)", started)
            report["fanout"] = fanout_run(tmp, server, args.fanout)
            say(f"{args.devices} devices, {args.rounds} pushes each between pulls", started)
            report["devices"] = scale_devices.run(tmp, server, args.devices, args.rounds)
        finally:
            server.stop()
    report["seconds"] = time.time() - started
    report["load_after"] = os.getloadavg()[0]
    return report


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def print_report(r: dict[str, Any]) -> None:
    print(
        "\n| memories | pull 1 change: ms, requests, bytes down | no-op pull: requests (writes), bytes | "
        "offline 10 %: s, applied, MB | B/memory: memory, manifest, critical, all |"
    )
    print("|---:|---|---|---|---|")
    for x in r["levels"]:
        n, st = x["memories"], Storage(kinds=x["storage"]["kinds"])
        one, noop, off = x["one_change"], x["no_op"], x["offline"]
        print(
            f"| {n:,} | {one['s'] * 1000:.1f}, {one['requests']}, {one['down']:,} "
            f"| {noop['requests']} ({noop['writes']}), {noop['down']:,} "
            f"| {off['s']:.2f}, {off['applied']:,}, {off['down'] / 1e6:.1f} "
            f"| {st.bytes_of('memory') / n:.0f}, {st.bytes_of('manifest') / n:.0f}, "
            f"{st.bytes_of('critical') / n:.0f}, {x['storage']['bytes'] / n:.0f} |"
        )
    print(
        "\n| memories | restore loopback: s (usable s) | restore at RTT: s (usable s, first "
        "searchable s, all warm searchable s), requests "
        "| download / server's record bytes | download / bytes of the records streamed |"
    )
    print("|---:|---|---|---:|---:|")
    for x in r["levels"]:
        lo, rt = x["restore_loopback"], x["restore_rtt"]
        print(
            f"| {x['memories']:,} | {lo['s']:.2f} ({lo['usable_s']:.2f}) "
            f"| {rt['s']:.2f} ({rt['usable_s']:.2f}, {rt['searchable_s']:.2f}, "
            f"{rt['warm_s']:.2f}), {rt['requests']} "
            f"| {lo['down'] / x['storage']['bytes']:.2f}x "
            f"| {lo['down'] / max(1, lo.get('record_bytes', 0)):.2f}x |"
        )
    p = r["prune"]
    after = p["restore_after"]
    print(
        f"\ndefault prune: {p['s']:.2f} s, {p['deleted']:,} rows deleted, "
        f"{p.get('compacted', 0)} manifests compacted, {p['requests']} requests, "
        f"{_mb(p['down'])} down; after it {p['storage']['rows']:,} rows, "
        f"{_mb(p['storage']['bytes'])}, manifests and checkpoint {p['manifest_share']:.1%} of "
        f"the bytes; a restore after it: {after['s']:.2f} s, {_mb(after['down'])} down "
        f"({after['down'] / max(1, p['storage']['bytes']):.2f}x the server's record bytes)"
    )
    for label, x in r["prune_next"].items():
        print(
            f"next prune ({label}: previous checkpoint {x['previous']}): {x['s']:.2f} s, "
            f"{x['requests']} requests, {x['down']:,} B down (checkpoint "
            f"{x['checkpoint_bytes']:,} B sealed, {x['compacted']} manifests compacted)"
        )
    w = r["warm_first"]
    print(
        f"\nwarm before cold ({w['memories']:,} memories, {w['warm']:,} warm, the oldest under "
        f"a cold archive), restore at RTT: s (usable s, first searchable s, all warm "
        "searchable s), requests, bytes down"
    )
    for label in ("newest_first", "warm_first"):
        x = w[label]
        print(
            f"{label.replace('_', ' ')}: {x['s']:.2f} ({x['usable_s']:.2f}, "
            f"{x['searchable_s']:.2f}, {x['warm_s']:.2f}), {x['requests']}, {x['down']:,}"
        )
    f = r["fanout"]
    print(
        f"fan-out: B's pull after 1 hot push {f['one']['down']:,} B; after {f['k_count']} "
        f"{f['k']['down']:,} B ({f['ratio']:.2f} critical versions); after {f['k_count']} "
        f"one-memory pushes {f['memories_k']['down']:,} B"
    )
    scale_devices.print_report(r["devices"])
    print_goals(r)


def print_goals(r: dict[str, Any]) -> None:
    levels, last = r["levels"], r["levels"][-1]
    after_prune = r["prune"]
    at_300k = extrapolate(levels, "restore_rtt", TARGET_MEMORIES)
    usable = max(x["restore_rtt"]["usable_s"] for x in levels)
    download = last["restore_loopback"]["down"] / last["storage"]["bytes"]
    rows = [
        (
            "pull after K hot pushes by another device (critical versions)",
            r["fanout"]["ratio"],
            GOALS["fanout_ratio"],
            "measured",
        ),
        (
            "manifests' share of server bytes after the default prune",
            after_prune["manifest_share"],
            GOALS["manifest_share"],
            "measured",
        ),
        (
            "restore download / record bytes (largest level)",
            download,
            GOALS["restore_download"],
            "measured",
        ),
        (
            f"full restore of {TARGET_MEMORIES:,} at {r['rtt'] * 1000:.0f} ms RTT (s)",
            at_300k,
            GOALS["restore_300k_s"],
            f"extrapolated from {last['memories']:,}",
        ),
        ("restore usable at RTT (s, largest of the levels)", usable, GOALS["usable_s"], "measured"),
        ("write requests of a no-op pull", float(last["no_op"]["writes"]), 0.0, "measured"),
    ]
    print("\n| goal | measured | target | how |\n|---|---:|---:|---|")
    for name, value, goal, how in rows:
        mark = "" if value <= goal else " (over)"
        print(f"| {name} | {value:.3g}{mark} | ≤ {goal:g} | {how} |")
    print(
        f"\nload average {r['load_before']:.2f} before, {r['load_after']:.2f} after; "
        f"{r['seconds']:.0f} s in all"
    )


if __name__ == "__main__":
    sys.exit(main())
