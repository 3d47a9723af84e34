"""The ranking snapshot tells two runs of the same code apart from a change in ranking."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.ranking_snapshot import main


def test_same_code_gives_the_same_snapshot_and_a_changed_score_is_caught(
    tmp_path: Path, capsys
) -> None:
    home = tmp_path / "home"
    assert main(["build", str(home), "--size", "300"]) == 0
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["dump", str(home), str(first), "--queries", "30"]) == 0
    assert main(["dump", str(home), str(second), "--queries", "30"]) == 0
    assert main(["compare", str(first), str(second)]) == 0
    assert ": 0 differ" in capsys.readouterr().out
    results = json.loads(second.read_text())
    hit = next(r for r in results if r["hits"])["hits"][0]
    hit["score"] += 1e-12
    second.write_text(json.dumps(results))
    assert main(["compare", str(first), str(second)]) == 1
    assert ": 1 differ" in capsys.readouterr().out
