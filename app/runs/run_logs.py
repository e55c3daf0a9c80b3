"""Per-run logs: what a handler logged or printed, captured by the worker, size-capped,
stored per attempt in `run_logs` and tailed on the run's page.

How lines are captured, by execution model:
- `async` and `thread`: the worker sets `CURRENT` (run id, attempt) in the attempt's task
  (thread jobs run in a copy of that context); `CaptureHandler` on the root logger takes
  every record emitted there, and `RoutedStream`, which stands in for `sys.stdout` and
  `sys.stderr`, takes what is printed there. Output outside any attempt goes where it
  always went.
- `process` and `subprocess`: the child captures the same way around the one handler call
  (`capture_in_child`); a thread there sends what accumulated every `CHILD_SEND_SECONDS`
  as a log frame on the reply pipe, so the lines reach the worker while the handler
  runs (even one that is killed or crashes later); the rest goes with the reply
  (`Outcome.logs`).

Each attempt keeps at most `MAX_BYTES_PER_ATTEMPT`; the line that crosses it is replaced by
a `TRUNCATED` marker and the rest is dropped. The worker writes what accumulated in one
statement per batch (`append`), about every `FLUSH_SECONDS` while runs are in flight and
before it records their finishes, never one round trip per line.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from app.core.sql import query

if TYPE_CHECKING:  # job children import this module; they need no database driver
    from _typeshed import ReadableBuffer

    from app.core.db import Conn

MAX_BYTES_PER_ATTEMPT = 64 * 1024
TRUNCATED = "… truncated: this attempt wrote more than 64 KB of log"
FLUSH_SECONDS = 0.5
CHILD_SEND_SECONDS = 0.25
LINES_SHOWN = 5_000
STREAMS = ("log", "stdout", "stderr")
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"

# The attempt whose handler runs in this context: (run id, attempt), or None.
CURRENT: ContextVar[tuple[int, int] | None] = ContextVar("sundial_run_attempt", default=None)

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

ChildLine = tuple[float, str, str]  # (unix time, stream, line): what a child sends back


@dataclass(frozen=True, slots=True)
class LogLine:
    run_id: int
    attempt: int
    seq: int
    at: float
    stream: str
    line: str


@dataclass(slots=True)
class _Unfinished:
    """A stream's line so far, in the pieces written: joined once, when the line ends, as
    adding each piece to one string would copy it all again (a character at a time:
    quadratic)."""

    pieces: list[str] = field(default_factory=list)
    chars: int = 0


@dataclass(slots=True)
class _AttemptLog:
    """One attempt's lines so far: sequence numbers, the byte budget, unfinished lines."""

    next_seq: int = 0
    used: int = 0
    truncated: bool = False
    partial: dict[str, _Unfinished] = field(default_factory=dict)


class LogCollector:
    """Lines of the attempts running in this process, until `drain` takes them. Thread
    safe: handlers log from pool threads."""

    def __init__(self, max_bytes: int = MAX_BYTES_PER_ATTEMPT) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._attempts: dict[tuple[int, int], _AttemptLog] = {}
        self._pending: list[LogLine] = []

    def write(self, key: tuple[int, int], stream: str, text: str, at: float | None = None) -> None:
        """Text as it is written: complete lines are kept, the rest waits for its end."""
        with self._lock:
            state = self._attempts.setdefault(key, _AttemptLog())
            if state.truncated:
                return
            if "\n" not in text:
                unfinished = state.partial.get(stream)
                if unfinished is None:
                    unfinished = state.partial[stream] = _Unfinished()
                unfinished.pieces.append(text)
                unfinished.chars += len(text)
                if unfinished.chars > self.max_bytes - state.used:  # it can only truncate
                    del state.partial[stream]
                    self._add(key, state, stream, "".join(unfinished.pieces), at)
                return
            if stream in state.partial:
                text = "".join(state.partial.pop(stream).pieces) + text
            *lines, rest = text.split("\n")
            if rest:
                state.partial[stream] = _Unfinished([rest], len(rest))
            for line in lines:
                self._add(key, state, stream, line, at)

    def add_line(
        self, key: tuple[int, int], stream: str, line: str, at: float | None = None
    ) -> None:
        with self._lock:
            self._add(key, self._attempts.setdefault(key, _AttemptLog()), stream, line, at)

    def close(self, key: tuple[int, int]) -> None:
        """The attempt ended: keep its unfinished lines and forget it."""
        if key not in self._attempts:  # it logged nothing (most runs): no lock needed
            return
        with self._lock:
            state = self._attempts.pop(key, None)
            if state is None:
                return
            for stream, rest in state.partial.items():
                self._add(key, state, stream, "".join(rest.pieces), None)

    def _add(
        self, key: tuple[int, int], state: _AttemptLog, stream: str, line: str, at: float | None
    ) -> None:
        if state.truncated:
            return
        line = _UNSTORABLE.sub("\ufffd", line.rstrip("\r"))
        size = len(line.encode()) + 1
        if state.used + size > self.max_bytes:
            state.truncated, line = True, TRUNCATED
        state.used += size
        self._pending.append(
            LogLine(key[0], key[1], state.next_seq, at or time.time(), stream, line)
        )
        state.next_seq += 1

    def pending(self) -> bool:
        return bool(self._pending)

    def drain(self) -> list[LogLine]:
        with self._lock:
            lines, self._pending = self._pending, []
        return lines


class CaptureHandler(logging.Handler):
    """Sends log records emitted inside an attempt (see `CURRENT`) to a collector."""

    def __init__(self, collector: LogCollector) -> None:
        super().__init__(logging.DEBUG)
        self.collector = collector
        self.setFormatter(logging.Formatter(LOG_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        key = CURRENT.get()
        if key is None:
            return
        try:
            text = self.format(record)
        except Exception:  # a record whose message cannot be formatted
            text = f"{record.levelname} {record.name}: {record.msg!r}"
        for line in text.split("\n"):
            self.collector.add_line(key, "log", line, record.created)


class RoutedStream(io.TextIOBase):
    """Stands in for sys.stdout / sys.stderr: inside an attempt, text goes to the
    collector; elsewhere to the stream it replaced."""

    def __init__(self, collector: LogCollector, stream: str, original: TextIO) -> None:
        self.collector = collector
        self.stream = stream
        self.original = original
        self.buffer = RoutedBytes(self)  # handlers writing bytes to sys.stdout.buffer

    def write(self, text: str) -> int:
        key = CURRENT.get()
        if key is None:
            return self.original.write(text)
        self.collector.write(key, self.stream, text)
        return len(text)

    def flush(self) -> None:
        self.original.flush()

    def fileno(self) -> int:
        return self.original.fileno()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.original, "encoding", "utf-8")


class RoutedBytes(io.BufferedIOBase):
    """The `buffer` of a `RoutedStream`: bytes are read as UTF-8 (what is not becomes
    U+FFFD) and written as text."""

    def __init__(self, text: RoutedStream) -> None:
        self.text = text

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer) -> int:
        raw = bytes(data)
        self.text.write(raw.decode("utf-8", "replace"))
        return len(raw)

    def flush(self) -> None:
        self.text.flush()


def install(collector: LogCollector) -> None:
    """Capture in this process: a root-logger handler and routed stdout/stderr."""
    root = logging.getLogger()
    if not any(isinstance(h, CaptureHandler) for h in root.handlers):
        root.addHandler(CaptureHandler(collector))
    if not isinstance(sys.stdout, RoutedStream):
        sys.stdout = RoutedStream(collector, "stdout", sys.stdout)
    if not isinstance(sys.stderr, RoutedStream):
        sys.stderr = RoutedStream(collector, "stderr", sys.stderr)


def uninstall(collector: LogCollector) -> None:
    """Undo `install` (a worker that stops inside a longer-lived process, e.g. tests)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, CaptureHandler)]:
        if handler.collector is collector:
            root.removeHandler(handler)
    if isinstance(sys.stdout, RoutedStream) and sys.stdout.collector is collector:
        sys.stdout = sys.stdout.original
    if isinstance(sys.stderr, RoutedStream) and sys.stderr.collector is collector:
        sys.stderr = sys.stderr.original


@contextlib.contextmanager
def capture_in_child(
    run_id: int, attempt: int, send: Callable[[list[ChildLine]], object] | None = None
) -> Iterator[list[ChildLine]]:
    """In a job child, around one handler call: the lines it logged and printed, capped.
    With `send`, a thread hands it the lines so far every `CHILD_SEND_SECONDS` while the
    block runs; the list holds the rest when the block ends (they go with the reply)."""
    collector = LogCollector()
    handler = CaptureHandler(collector)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, logging.INFO) if level else logging.INFO)
    key = (run_id, attempt)
    token = CURRENT.set(key)
    out, err = sys.stdout, sys.stderr
    sys.stdout = RoutedStream(collector, "stdout", out)
    sys.stderr = RoutedStream(collector, "stderr", err)
    sender = _Sender(collector, send) if send is not None else None
    lines: list[ChildLine] = []
    try:
        yield lines
    finally:
        if sender is not None:
            sender.stop()  # no batch is sent after the block: the reply comes next
        sys.stdout, sys.stderr = out, err
        CURRENT.reset(token)
        root.removeHandler(handler)
        root.setLevel(level)
        collector.close(key)
        lines.extend(_child_lines(collector.drain()))


class _Sender(threading.Thread):
    """Hands a child's captured lines to `send` now and then, from its own thread, so a
    handler that never yields (CPU-bound, blocked in C) does not hold them back."""

    def __init__(self, collector: LogCollector, send: Callable[[list[ChildLine]], object]) -> None:
        super().__init__(name="run log sender", daemon=True)
        self.collector = collector
        self.send = send
        self._stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self._stopping.wait(CHILD_SEND_SECONDS):
            self._send_pending()  # once stopped, what is left goes with the reply

    def _send_pending(self) -> None:
        lines = self.collector.drain()
        if lines:
            try:
                self.send(_child_lines(lines))
            except Exception:  # e.g. the worker is gone: the reply will say so
                self._stopping.set()

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def _child_lines(lines: list[LogLine]) -> list[ChildLine]:
    return [(x.at, x.stream, x.line) for x in lines]


def add_child_lines(collector: LogCollector, key: tuple[int, int], lines: Sequence[Any]) -> None:
    """Lines a child sent back (untrusted shape: anything odd is skipped)."""
    for item in lines:
        try:
            at, stream, line = item
            if stream in STREAMS and isinstance(line, str):
                collector.add_line(key, stream, line, float(at))
        except (TypeError, ValueError):
            continue


# ---- the database ---------------------------------------------------------------------


def append(conn: Conn, lines: Sequence[LogLine]) -> None:
    """Store a batch of lines in one statement; a batch sent twice is stored once."""
    if not lines:
        return
    conn.execute(
        query("run_logs", "run_logs_append"),
        {
            "run_ids": [x.run_id for x in lines],
            "attempts": [x.attempt for x in lines],
            "seqs": [x.seq for x in lines],
            "ats": [datetime.fromtimestamp(x.at, UTC) for x in lines],
            "streams": [x.stream for x in lines],
            "lines": [x.line for x in lines],
        },
    )


def run_summary(conn: Conn, run_id: int) -> dict[str, Any] | None:
    row: dict[str, Any] | None = conn.execute(
        query("run_logs", "run_logs_run"), {"run_id": run_id}
    ).fetchone()
    return row


def lines_of(conn: Conn, run_id: int, limit: int = LINES_SHOWN) -> list[dict[str, Any]]:
    """A run's lines, attempt by attempt, in the order they were written."""
    return conn.execute(
        query("run_logs", "run_logs_of_run"), {"run_id": run_id, "limit": limit}
    ).fetchall()
