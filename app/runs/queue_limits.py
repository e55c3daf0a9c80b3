"""Whether a queue has a concurrency limit, as this process's claims see it.

A limited queue's runs are claimed by `run_claim_limited`, in the queue's claim turn; the
others by the plain `run_claim`, which takes nothing from a limited queue. So a limit set
while a worker still thinks its queue open holds all the same: that worker claims nothing
until it reads the queue again, at most `RECHECK_SECONDS` later.
"""

from __future__ import annotations

import time

from app.core.db import Conn
from app.core.sql import query

RECHECK_SECONDS = 1.0

_seen: dict[str, tuple[float, bool]] = {}  # queue -> (when read, limited)


def limited(conn: Conn, queue: str) -> bool:
    """Whether `queue` has a concurrency limit (read again after `RECHECK_SECONDS`)."""
    now = time.monotonic()
    seen = _seen.get(queue)
    if seen is not None and now - seen[0] < RECHECK_SECONDS:
        return seen[1]
    row = conn.execute(query("queues", "queue_limited"), {"name": queue}).fetchone()
    is_limited = bool(row and row["limited"])
    _seen[queue] = (now, is_limited)
    return is_limited


def forget(queue: str | None = None) -> None:
    """Read `queue` (or every queue) afresh at the next claim: its limits just changed."""
    if queue is None:
        _seen.clear()
    else:
        _seen.pop(queue, None)
