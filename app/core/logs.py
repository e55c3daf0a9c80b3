"""Structured logs: one JSON object per line, carrying run id and attempt where there is one.

Pass context with `extra`: `log.info("run completed", extra={"run_id": 7, "attempt": 2})`.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from app.core.text import safe_lines

CONTEXT_FIELDS = (
    "run_id",
    "attempt",
    "worker",
    "schedule_id",
    "handler",
    "term",
    "count",
    "outcome",
    "error",
    # the web's access log
    "method",
    "path",
    "status",
    "duration_ms",
    "client",
)


class JsonFormatter(logging.Formatter):
    def __init__(self, process_name: str) -> None:
        super().__init__()
        self.process_name = process_name

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "process": self.process_name,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in CONTEXT_FIELDS:
            value = record.__dict__.get(field)
            if value is not None:
                entry[field] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """Lines for a terminal: what handlers and people wrote (errors, names) can hold escape
    sequences, printed escaped; JSON lines are escaped by the JSON encoding itself."""

    def __init__(self, process_name: str) -> None:
        super().__init__(f"%(asctime)s {process_name} %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = [
            f"{f}={record.__dict__[f]}"
            for f in CONTEXT_FIELDS
            if record.__dict__.get(f) is not None
        ]
        return safe_lines(f"{line} [{' '.join(context)}]" if context else line)


def configure_logging(process_name: str, level: str = "INFO", fmt: str = "json") -> None:
    """Send every log line of this process to stderr in `fmt` ("json" or "text")."""
    handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter(process_name) if fmt == "json" else TextFormatter(process_name)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("pgserver", "alembic", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


# ---- the web's access log ---------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

access_log = logging.getLogger("sundial.access")


class AccessLog:
    """ASGI wrapper writing one log line per HTTP request once it ends: method, path,
    status, duration and client address (uvicorn's own access log is off).

    The path is logged without its query string, which can hold a sign-in link's token.
    The client is read after the app ran: the trusted-proxy middleware replaces
    `scope["client"]` with the forwarded address, so behind a trusted proxy the log names
    the real client, not the router."""

    def __init__(self, app: Asgi) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers when the app raises before responding

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            client = scope.get("client")
            fields = {
                "method": scope.get("method", ""),
                "path": scope.get("path", ""),
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                "client": client[0] if client else None,
            }
            access_log.info("%s %s %d", fields["method"], fields["path"], status, extra=fields)


# ---- uncaught exceptions of job children -------------------------------------------------


def json_lines_in_child(process_name: str) -> None:
    """A job child's own lines on stderr are JSON: warnings it logs outside a run (a run's
    lines are captured as its run log) and an exception escaping its main code or one of
    its threads, traceback inside, instead of Python's raw text."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(process_name))
    handler.setLevel(logging.WARNING)
    logging.getLogger().handlers[:] = [handler]
    formatter = JsonFormatter(process_name)

    def write(
        kind: type[BaseException],
        exc: BaseException,
        tb: TracebackType | None,
        where: str,
    ) -> None:
        record = logging.makeLogRecord(
            {
                "name": process_name,
                "levelname": "ERROR",
                "levelno": logging.ERROR,
                "msg": f"uncaught {kind.__name__} in {where}: {exc}",
                "exc_info": (kind, exc, tb),
            }
        )
        stream = sys.__stderr__  # not a run's captured stderr
        if stream is not None:
            stream.write(formatter.format(record) + "\n")
            stream.flush()

    def on_main(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        write(kind, exc, tb, "the main thread")

    def on_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        write(args.exc_type, args.exc_value, args.exc_traceback, f"thread {name}")

    sys.excepthook = on_main
    threading.excepthook = on_thread
