"""Answers that are true now: a benchmark of facts that change, on real chat-export formats.

`python -m benchmarks.current_truth` imports each person's history through the CLI and asks
what is true now, what was true on a date, and what changed; see README.md in this folder.
"""
