"""Bounded stress: a 50 MB transcript is distilled and stored without blowing up (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clikit import cli_json


@pytest.mark.slow
def test_a_50_mb_transcript(capsys, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = {"type": "message", "message": {"role": "user", "content": ""}}
    with path.open("w", encoding="utf-8") as handle:
        i = 0
        while handle.tell() < 50 * 1024 * 1024:
            line["message"]["content"] = (  # type: ignore[index]
                f"We decided to rename service {i} to svc-{i}; docs https://x.example/{i % 997} "
                f"and run `make deploy-{i % 13}`. Thanks, that sounds fine to me."
            )
            handle.write(json.dumps(line) + "\n")
            if i % 100_000 == 0:
                handle.write("{broken json line\n")
            i += 1
    out = cli_json(capsys, tmp_path / "home", "conversation-end", str(path))
    assert out["facts"] == 20 and len(out["stored"]) == 20
    assert out["warnings"][0].startswith("line 2: not valid JSON")
    listed = cli_json(capsys, tmp_path / "home", "urls")
    assert listed["count"] >= 50  # the record keeps 50; the kept facts carry their own
