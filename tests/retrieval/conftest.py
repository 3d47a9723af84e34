"""Retrieval fixtures: the loopback OpenAI-compatible chat server used by LLM tree search."""

from tests.chat_server import ChatServer, chat_server, completion

__all__ = ["ChatServer", "chat_server", "completion"]
