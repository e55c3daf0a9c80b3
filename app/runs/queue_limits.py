"""Whether a queue has a concurrency or rate limit, as this process's claims see it.

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

_seen: dict[str, tuple[float, bool]] = {}  # queue -> (read at, limited)


def limited(conn: Conn, queue: str) -> bool:
    """Whether `queue` has a concurrency or rate limit (read again after
    `RECHECK_SECONDS`)."""
    now = time.monotonic()
    seen = _seen.get(queue)
    if seen is None or now - seen[0] >= RECHECK_SECONDS:
        row = conn.execute(query("queues", "queue_limited"), {"name": queue}).fetchone()
        seen = (now, bool(row and row["limited"]))
        _seen[queue] = seen
    return seen[1]


_next_start: dict[str, float] = {}  # queue -> when its rate allows the next start (monotonic)


def rate_bucket_left(queue: str, tokens: float, per_second: float) -> None:
    """Note what a claim left in `queue`'s rate bucket: the next start is due when it holds
    a whole one again."""
    _next_start[queue] = time.monotonic() + max(0.0, 1.0 - tokens) / per_second


def seconds_to_next_start(queue: str) -> float | None:
    """How long until `queue`'s rate allows another start, as this process's last claim
    saw it (None: no rate limit seen)."""
    due = _next_start.get(queue)
    return None if due is None else max(0.0, due - time.monotonic())


def forget(queue: str | None = None) -> None:
    """Read `queue` (or every queue) afresh at the next claim: its limits just changed."""
    if queue is None:
        _seen.clear()
        _next_start.clear()
    else:
        _seen.pop(queue, None)
        _next_start.pop(queue, None)
