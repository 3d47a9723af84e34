"""The shared-space load test's harness at a small size, on a real sqld with JWT auth: every
member holds every round's writes when a round ends, the late member pulls the whole history,
in both the catch-up mode and the mode where members hold the history."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import spaces_scale


@pytest.mark.slow
@pytest.mark.parametrize("full", [False, True])
def test_members_converge_on_every_round(tmp_path: Path, full: bool) -> None:
    report = spaces_scale.run(3, [200, 400], 2, tmp_path, full)
    assert [s["memories"] for s in report["steps"]] == [206, 406]
    assert all(s["converged"] and s["pulls_per_member"] >= 1 for s in report["steps"])
    assert all(s["server_bytes_per_memory"] > 0 for s in report["steps"])
    if full:
        assert report["late_member"]["memories"] == 206
    else:
        assert "late_member" not in report
