"""How a worker tells the dashboard that runs changed: at most every `TELL_SECONDS`.

A claim or a finish once notified `sundial_events` ('runs') in each of its transactions. A
transaction that notified takes one instance-wide lock at commit (notifications keep commit
order), so thousands of claims and finishes a second queue behind each other: 11 % of the
claim and finish rate with 8 processes (`bench.drain_ceiling --notify-cost`). The hub turns
notifications into browser ticks every quarter second anyway, so a worker's statements carry
the notification only when its last one is that old (`take`), and a change that went
untold is told by the finisher once the interval is up (`take_owed`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from app.core.db import Conn
from app.core.sql import query

TELL_SECONDS = 0.25  # the dashboard hub's own flush interval


class DashboardTells:
    """One worker's tells; its claim, listener and finisher threads share it."""

    def __init__(
        self, interval: float = TELL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._told_at = -interval  # nothing told yet: the first change tells at once
        self._owed = False

    def take(self) -> bool:
        """Before a statement that may change runs: whether it should tell the dashboard.
        If not, a tell is owed (the statement may change something nobody hears of)."""
        with self._lock:
            now = self._clock()
            if now - self._told_at >= self.interval:
                self._told_at, self._owed = now, False
                return True
            self._owed = True
            return False

    def owed_in(self) -> float | None:
        """Seconds until an owed tell is due (0: now), or None when none is owed."""
        with self._lock:
            if not self._owed:
                return None
            return max(0.0, self._told_at + self.interval - self._clock())

    def take_owed(self, *, now_or_never: bool = False) -> bool:
        """Whether to send the owed tell now (it is due, or `now_or_never`: the worker is
        stopping); taking it marks it told."""
        with self._lock:
            if not self._owed:
                return False
            now = self._clock()
            if not now_or_never and now - self._told_at < self.interval:
                return False
            self._told_at, self._owed = now, False
            return True


def tell_runs_changed(conn: Conn) -> None:
    """Tell the dashboard's hub that runs changed (one notification, its own transaction)."""
    conn.execute(query("workers", "worker_tell_runs_changed"))
