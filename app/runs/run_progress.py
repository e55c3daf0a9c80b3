"""A worker's progress board: the latest report of each running attempt (`ctx.progress`),
until the finisher writes them all in one statement (`transitions.report_progress`).

Handlers may report many times a second; the board keeps only the latest report per
attempt, and the worker writes at most every `WRITE_SECONDS` (and once more just before it
records finishes, so an attempt's last report lands while it still holds its run).
Thread safe: reports come from pool threads, the event loop and children's messages.
"""

from __future__ import annotations

import threading
from typing import Any

from app.core.errors import UsageError
from app.handlers.jobs import check_progress

WRITE_SECONDS = 1.0

Report = tuple[float, str | None]


class ProgressBoard:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[tuple[int, int], Report] = {}

    def report(self, key: tuple[int, int], value: Any, message: Any = None) -> None:
        """The attempt `key`'s latest report; one that is not a valid report (a child's
        message is not trusted) is dropped."""
        try:
            checked = check_progress(value, message)
        except UsageError:
            return
        with self._lock:
            self._latest[key] = checked

    def pending(self) -> bool:
        return bool(self._latest)

    def drain(self) -> dict[tuple[int, int], Report]:
        with self._lock:
            latest, self._latest = self._latest, {}
        return latest
