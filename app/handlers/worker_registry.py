"""What workers registered, for the checks that name a handler (schedules, jobs, args).

A worker seen within LIVE_SECONDS and not stopped counts as live: its handlers are on
offer and their declared args schemas are trusted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.core.db import Conn
from app.core.sql import query

LIVE_SECONDS = 300


def registrations(conn: Conn, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every worker's handler names, each with `live`."""
    return conn.execute(
        query("schedules", "worker_handlers"), {"live_seconds": LIVE_SECONDS, "now": now}
    ).fetchall()
