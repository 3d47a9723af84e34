"""The commands of `tiermem`, one module per command group, each imported only when its command
runs (see ../registry.py)."""
