"""Write-path benchmark: distillation throughput, daily-note ingestion, compression, dedup cost,
watcher latency.

    .venv/bin/python -m benchmarks.write_bench [--conversations 2000] [--seed 7]

Everything is generated (seeded) in a temp folder; each figure is printed with a baseline
measured in the same run:

- rule-mode distillation (parse + distill) vs a bare word scan of the same text (`\\w+`);
- daily-note ingestion of a generated year (365 notes) vs `store_many` of the same facts;
- compression raw → distilled → summary vs the original design's 500 B → 80 B → 20 B;
- batched stores with near-duplicate detection vs exact-only (`[dedup] near = false`);
- watcher latency (note written → its facts in the database) vs the issue's 2 s.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tiermem.core.config import Config, DedupConfig
from tiermem.core.distill import distill_rule
from tiermem.core.engine import Memory
from tiermem.core.ingest import daily_dir, note_items
from tiermem.core.transcript import parse
from tiermem.core.watch import Watcher

PEOPLE = ["Sarah", "Ahmed", "Luna", "Chen", "Priya", "Tom", "Ines", "Kofi"]
PROJECTS = ["EvoClaw", "garden bot", "tax return", "home lab", "blog", "BSC bridge"]
THINGS = ["deploy script", "dashboard", "backup job", "API gateway", "invoice", "test suite"]
TOOLS = ["npm", "docker", "git", "make", "pytest", "kubectl"]
CHATTER = [
    "User: hi!",
    "Assistant: Hello! How can I help today?",
    "User: thanks, that helps",
    "Assistant: Sure thing, happy to help with that.",
    "User: ok",
    "Assistant: Let me know if there is anything else.",
    "User: can you remind me what we discussed last time?",
    "Assistant: Of course, here is a short recap of where we left off.",
]
FACTS = [
    "User: We decided to move the {thing} for {project} to the new server next week.",
    "User: Lesson learned: always run the {thing} checks before merging into main.",
    "User: {person}'s birthday is on May {n}, please remember it.",
    "User: I prefer short answers with code first and no emojis.",
    "Assistant: I'll update the {thing} for {project} tomorrow morning.",
    "User: The {thing} docs are at https://docs.example.org/{project_slug}/{n} for reference.",
    "User: Run `{tool} run {thing_slug} --env prod` from ~/src/{project_slug} to rebuild it.",
    "User: We shipped the {thing} for {project} today after fixing the flaky test.",
    "User: Need to renew the certificate for the {thing} before the deadline on March {n}.",
]
NOTE_LINES = [
    "- Met {person} about the {thing} for {project}",
    "- Decided to keep the {thing} on the old cluster until {month}",
    "- Fixed the {thing} bug with `{tool} test -k {thing_slug}`",
    "- Dashboard for {project}: https://grafana.example.org/d/{n}",
    "- {person} suggested a new layout for the {thing}",
    "- Lesson: never deploy the {thing} on Fridays",
    "- [ ] Follow up with {person} on the {thing} quote",
    "- [x] Paid the {thing} invoice for {project}",
    "- Config lives in /etc/{project_slug}/{thing_slug}.toml now",
]
MONTHS = ["January", "March", "May", "July", "September", "November"]


def fill(template: str, rng: random.Random, n: int) -> str:
    project = rng.choice(PROJECTS)
    thing = rng.choice(THINGS)
    return template.format(
        person=rng.choice(PEOPLE),
        project=project,
        project_slug=project.lower().replace(" ", "-"),
        thing=thing,
        thing_slug=thing.lower().replace(" ", "-"),
        tool=rng.choice(TOOLS),
        month=rng.choice(MONTHS),
        n=n,
    )


def conversation(rng: random.Random, i: int) -> str:
    """About 500 bytes: greetings and chatter around two or three facts."""
    lines = [rng.choice(CHATTER[:2])]
    for k in range(rng.randint(3, 4)):
        lines.append(fill(rng.choice(FACTS), rng, i * 10 + k))
        lines.append(rng.choice(CHATTER[2:]))
    return "\n".join(lines) + "\n"


def year_of_notes(rng: random.Random, folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    start = time.mktime((2025, 1, 1, 12, 0, 0, 0, 0, 0))
    size = 0
    for day in range(365):
        date = time.strftime("%Y-%m-%d", time.gmtime(start + day * 86400))
        body = [f"# {date}", "", "## Log"]
        body += [
            fill(rng.choice(NOTE_LINES), rng, day * 100 + k) for k in range(rng.randint(8, 14))
        ]
        body += ["", "## Next steps", fill("- [ ] Check the {thing} again", rng, day)]
        text = "\n".join(body) + "\n"
        (folder / f"{date}.md").write_text(text, encoding="utf-8")
        size += len(text.encode())
    return size


def bench_distill(convs: list[str]) -> None:
    text = "".join(convs)
    kb = len(text.encode()) / 1024
    started = time.perf_counter()
    out = distill_rule(parse(text), Config().distill)
    ours = time.perf_counter() - started
    started = time.perf_counter()
    words = len(re.findall(r"\w+", text))
    base = time.perf_counter() - started
    print(
        f"rule distillation: {kb:,.0f} KB in {ours:.2f} s = {kb / ours:,.0f} KB/s "
        f"({len(out.facts)} top facts kept) | baseline \\w+ scan {kb / base:,.0f} KB/s "
        f"({words:,} words) | ratio {ours / base:.0f}x the scan"
    )


def bench_compression(convs: list[str]) -> None:
    raw, distilled, summary, facts = [], [], [], []
    for text in convs:
        out = distill_rule(parse(text), Config().distill)
        raw.append(out.raw_bytes)
        facts.append(len(out.facts))
        distilled.append(out.distilled_bytes / max(1, len(out.facts)))
        summary.append(out.summary_bytes)
    r, d, s = statistics.mean(raw), statistics.mean(distilled), statistics.mean(summary)
    total_d = statistics.mean(
        r_ * 0 + x * f for r_, x, f in zip(raw, distilled, facts, strict=True)
    )
    print(
        f"compression per conversation (mean of {len(convs)}): raw {r:,.0f} B → "
        f"{statistics.mean(facts):.1f} facts of {d:,.0f} B ({total_d:,.0f} B together) → "
        f"summary {s:,.1f} B | seed: 500 B → 80 B → 20 B | ratios raw/fact {r / d:.1f}x "
        f"(seed 6.2x), fact/summary {d / s:.1f}x (seed 4.0x), raw/summary {r / s:.0f}x (seed 25x)"
    )


def bench_ingest(tmp: Path, rng: random.Random) -> None:
    mem = Memory(tmp / "ingest")
    folder = daily_dir(mem)
    size = year_of_notes(rng, folder)
    started = time.perf_counter()
    report = mem.ingest_daily()
    first = time.perf_counter() - started
    facts = report.added + sum(f.merged for f in report.files)
    started = time.perf_counter()
    again = mem.ingest_daily()
    second = time.perf_counter() - started
    mem.close()
    assert again.added == 0
    items = []
    for path in sorted(folder.iterdir()):
        found, _ = note_items(path.read_text(), created_at=None, source="bench")
        items += [i.fact for i in found]
    base_mem = Memory(tmp / "baseline")
    started = time.perf_counter()
    base_mem.store_many(items)
    base = time.perf_counter() - started
    base_mem.close()
    print(
        f"daily notes, a generated year (365 files, {size / 1024:,.0f} KB, {facts:,} facts): "
        f"{365 / first:,.0f} files/s, {facts / first:,.0f} facts/s | re-ingest unchanged "
        f"{365 / second:,.0f} files/s | baseline store_many of the same facts "
        f"{len(items) / base:,.0f} facts/s | ratio {first / base:.1f}x the bare store"
    )


def bench_dedup(tmp: Path, rng: random.Random, n: int) -> None:
    from benchmarks.agent_gen import generate

    facts = list(generate(n, rng.randint(0, 1000), time.time() - 86400 * 365))
    timings = {}
    for label, near in (("near+exact", True), ("exact only", False)):
        mem = Memory(tmp / f"dedup-{label[:4]}", config=Config(dedup=DedupConfig(near=near)))
        started = time.perf_counter()
        for lo in range(0, n, 1000):
            mem.store_many(facts[lo : lo + 1000])
        timings[label] = time.perf_counter() - started
        mem.close()
    talk = [f"We decided to rename the {t} job for the {p} team" for t in THINGS for p in PROJECTS]
    real = Memory(tmp / "dedup-text")
    started = time.perf_counter()
    for text in talk * 20:
        real.store(text + rng.choice(["", ".", "!", " now"]), "work")
    per_store = (time.perf_counter() - started) / (len(talk) * 20)
    kept = sum(real.memories.counts().values())
    real.close()
    print(
        f"batched store of {n:,} generated facts: with near-duplicate detection "
        f"{n / timings['near+exact']:,.0f} facts/s | baseline exact-only "
        f"{n / timings['exact only']:,.0f} facts/s | ratio "
        f"{timings['near+exact'] / timings['exact only']:.2f}x; one-by-one near-duplicate-heavy "
        f"stores {per_store * 1000:.2f} ms each, {len(talk) * 20} writes kept as {kept} memories"
    )


def bench_watch(tmp: Path, rounds: int = 10) -> None:
    mem = Memory(tmp / "watch")
    reader = Memory(tmp / "watch")
    watcher = Watcher(mem).start()
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop, lambda e: None), daemon=True)
    thread.start()
    latencies = []
    folder = daily_dir(mem)
    for i in range(rounds):
        text = f"Watcher round {i} wrote the kettle descaling reminder"
        started = time.perf_counter()
        (folder / f"2025-02-{i + 1:02d}.md").write_text(f"- {text}\n")
        while not reader.db.scalar("SELECT 1 FROM memories WHERE text = ?", (text,)):
            time.sleep(0.005)
        latencies.append(time.perf_counter() - started)
    stop.set()
    watcher.wake()
    thread.join(5)
    watcher.stop()
    mem.close()
    reader.close()
    print(
        f"watcher: note written → facts stored, median {statistics.median(latencies):.2f} s, "
        f"max {max(latencies):.2f} s over {rounds} notes (debounce "
        f"{Config().ingest.debounce_seconds} s) | target 2 s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--dedup-facts", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    convs = [conversation(rng, i) for i in range(args.conversations)]
    bench_distill(convs * 5)
    bench_compression(convs)
    with tempfile.TemporaryDirectory(prefix="tiermem-write-bench-") as tmp:
        bench_ingest(Path(tmp), rng)
        bench_dedup(Path(tmp), rng, args.dedup_facts)
        bench_watch(Path(tmp))


if __name__ == "__main__":
    main()
