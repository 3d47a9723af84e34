"""tiermem sync: end-to-end encrypted sync to Turso."""

import sys

# httpx imports its command-line client (click, rich, pygments: ~40 ms) whenever those are
# installed, as they are here; tiermem never runs it, so it is marked absent and httpx keeps its
# own fallback for a missing client.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
