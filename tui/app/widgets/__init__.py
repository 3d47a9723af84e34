"""Reusable widgets of the tiermem TUI."""
