"""tiermem front ends: the CLI and the Textual app."""
