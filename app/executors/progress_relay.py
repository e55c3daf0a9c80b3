"""In a job child: the handler's progress reports, passed on to the worker as frames.

A handler may report progress in a tight loop; the relay keeps only the latest report and a
thread of its own sends it at most every `SEND_SECONDS` (the worker coalesces again before
it writes to the database). What is left when the handler returns goes out before the
reply, so the last report is never lost to the throttle. The thread starts with the first
report: most handlers report none.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

PROGRESS_KEY = "progress"
SEND_SECONDS = 0.25


def encode_progress_message(value: float, message: str | None) -> bytes:
    return json.dumps({PROGRESS_KEY: [value, message]}).encode()


class ProgressRelay:
    """Use: give `relay.report` to the handler's context, call `relay.stop()` once the
    handler returned (it sends what is left)."""

    def __init__(self, send: Callable[[bytes], object]) -> None:
        self.send = send
        self._lock = threading.Lock()
        self._latest: tuple[float, str | None] | None = None
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._broken = False  # the worker is gone: the reply will say so

    def report(self, value: float, message: str | None) -> None:
        with self._lock:
            self._latest = (value, message)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="progress relay",
                                                daemon=True)  # fmt: skip
                self._thread.start()
        self._changed.set()

    def _run(self) -> None:
        while True:
            self._changed.wait()
            if self._stopping.is_set():
                return
            self._send_latest()
            self._stopping.wait(SEND_SECONDS)  # reports meanwhile only replace the latest

    def stop(self) -> None:
        self._stopping.set()
        self._changed.set()
        if self._thread is not None:
            self._thread.join()
        self._send_latest()

    def _send_latest(self) -> None:
        with self._lock:
            latest, self._latest = self._latest, None
            self._changed.clear()
        if latest is None or self._broken:
            return
        try:
            self.send(encode_progress_message(*latest))
        except Exception:
            self._broken = True
