"""Deleting the sign-ins that can no longer be used (the reaper calls this every few
minutes). The history of runs is not deleted row by row: it goes a day at a time
(`app.runs.history`). The statements are in `app/core/sql/retention.sql`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.core.db import Conn
from app.core.sql import query


@dataclass(frozen=True, slots=True)
class PrunedSignIns:
    sessions: int  # expired web sessions deleted
    links: int  # expired sign-in links deleted


def prune_sign_ins(conn: Conn, *, now: datetime | None = None, limit: int = 1000) -> PrunedSignIns:
    """Delete up to `limit` web sessions and `limit` sign-in links that expired by `now`
    (None: the database clock). Signing out deletes a session at once; these are the ones
    nobody signed out of, and links nobody used."""
    params = {"now": now, "limit": limit}
    with conn.transaction():
        sessions = conn.execute(query("retention", "session_prune"), params).fetchone()
        links = conn.execute(query("retention", "sign_in_link_prune"), params).fetchone()
    assert sessions is not None and links is not None
    return PrunedSignIns(int(sessions["sessions"]), int(links["links"]))
