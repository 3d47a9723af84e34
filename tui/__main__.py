"""`python -m tiermem.tui` runs the CLI (the console script `tiermem` is the usual way)."""

from tiermem.tui.entry import main

main()
