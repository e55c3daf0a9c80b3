"""A real HTTP server in a thread that receives webhook POSTs and counts them, for the
notification tests; `answers` is the status of each POST in turn (then 200)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Receiver:
    url: str
    answers: list[int] = field(default_factory=list)
    delay_first: float = 0.0  # seconds the first POST waits before its answer
    posts: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return len(self.posts)

    def keys(self) -> list[str]:
        with self.lock:
            return [p.headers.get("Idempotency-Key", "") for p in self.posts]


@contextmanager
def receiver(answers: list[int] | None = None, delay_first: float = 0.0) -> Iterator[Receiver]:
    state = Receiver("", list(answers or []), delay_first)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            with state.lock:
                first = not state.posts
                state.posts.append(Received(dict(self.headers.items()), body))
                status = state.answers.pop(0) if state.answers else 200
            if first and state.delay_first:
                time.sleep(state.delay_first)
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
