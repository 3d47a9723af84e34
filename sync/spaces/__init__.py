"""Shared memory spaces across people and devices: a space syncs through a vault of its own."""
