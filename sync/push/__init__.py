"""Sending: sealing changes into batches, sending them, and pushing after a conversation."""
