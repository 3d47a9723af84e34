"""Retrieval fixtures: a real OpenAI-compatible chat server on loopback for LLM tree search."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

Reply = Callable[[dict[str, Any]], tuple[int, bytes]]


@dataclass
class ChatServer:
    """Answers POST /v1/chat/completions with `reply(body)`; records every request; with
    `hang`, never answers (until the test ends)."""

    reply: Reply
    hang: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""


def completion(content: str) -> bytes:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}}
    return json.dumps({"object": "chat.completion", "choices": [choice]}).encode()


@pytest.fixture
def chat_server() -> Iterator[Callable[..., ChatServer]]:
    started: list[tuple[ThreadingHTTPServer, ChatServer, threading.Thread]] = []

    def start(reply: Reply, hang: bool = False) -> ChatServer:
        state = ChatServer(reply, hang)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                state.requests.append({"path": self.path, "body": body})
                if state.hang:
                    state.release.wait(10)
                    return
                status, payload = state.reply(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        started.append((server, state, thread))
        return state

    yield start
    for server, state, thread in started:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
