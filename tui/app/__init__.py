"""The Textual app: `TiermemApp`, its screens, widgets, messages and stylesheet."""

from tiermem.tui.app.app import TiermemApp

__all__ = ["TiermemApp"]
