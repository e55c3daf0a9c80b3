"""A schedule's rule as the recurrence math reads it, and the database's clock that due
decisions use.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from app.core.db import Conn
from app.core.sql import query
from app.scheduling.cron import DstRepeated, DstSkipped, Recurrence


def db_now(conn: Conn, now: datetime | None = None) -> datetime:
    """The database clock, or the injected `now` when given."""
    row = conn.execute(query("firing", "db_now"), {"now": now}).fetchone()
    assert row is not None
    moment: datetime = row["now"]
    return moment


def recurrence_of(row: Mapping[str, Any]) -> Recurrence:
    """The recurrence of a `schedules` row. An interval schedule without a start fires one
    interval after it was created, then every interval."""
    anchor = row["start_at"]
    if row["cron"] is None and anchor is None:
        anchor = row["created_at"].replace(microsecond=0) + timedelta(
            seconds=row["interval_seconds"]
        )
    return _recurrence(
        row["cron"],
        row["interval_seconds"],
        row["timezone"],
        anchor,
        row["end_at"],
        row["dst_skipped"],
        row["dst_repeated"],
    )


@lru_cache(maxsize=4096)
def _recurrence(
    cron: str | None,
    interval_seconds: int | None,
    timezone: str,
    start: datetime | None,
    end: datetime | None,
    dst_skipped: str,
    dst_repeated: str,
) -> Recurrence:
    """Cached: the trigger builds one per due schedule, and most share their settings."""
    if cron is not None:
        return Recurrence.from_cron(
            cron,
            timezone,
            start=start,
            end=end,
            dst_skipped=DstSkipped(dst_skipped),
            dst_repeated=DstRepeated(dst_repeated),
        )
    assert interval_seconds is not None and start is not None
    return Recurrence.every(interval_seconds, start, end=end, timezone=timezone)
