"""A real OpenAI-compatible chat server on loopback, for the LLM modes (distillation, tree
search): tests choose each answer, or make it hang."""

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
    """A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API.

    `reply` decides each answer from the request body; `requests` records what came in
    (path, headers, body); `hang` makes every answer wait until the test ends."""

    reply: Reply
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    hang: bool = False
    url: str = ""


def completion(content: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()


@pytest.fixture
def chat_server() -> Iterator[Callable[..., ChatServer]]:
    servers: list[tuple[ThreadingHTTPServer, ChatServer, threading.Thread]] = []

    def start(reply: Reply, hang: bool = False) -> ChatServer:
        state = ChatServer(reply=reply, hang=hang)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                state.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
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
        servers.append((server, state, thread))
        return state

    yield start
    for server, state, thread in servers:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
