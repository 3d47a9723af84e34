"""The screens of the tiermem TUI, one per file."""
