"""Locking due schedules, batch after batch: `DueCursor` hands out groups of due schedules
locked `FOR UPDATE SKIP LOCKED`, so helper connections fire other groups at the same time.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.core.db import Conn
from app.core.sql import query


class DueCursor:
    """Where the next batch of due schedules starts, shared by the connections firing
    them. Batches are locked one at a time and each starts after the (next_fire_time, id)
    of the one before, so none rescans the index entries that earlier batches left behind.
    A batch smaller than the limit was the last."""

    def __init__(self, now: datetime | None, limit: int) -> None:
        self.now = now
        self.limit = limit
        self.exhausted = False
        self._after: tuple[datetime, uuid.UUID] | None = None
        self._mutex = threading.Lock()

    def lock_next(self, conn: Conn) -> list[dict[str, Any]]:
        """Lock the next batch in `conn`'s open transaction: its schedules, those that
        fire alike as groups (`schedule_lock_due`)."""
        with self._mutex:
            if self.exhausted:
                return []
            after_time, after_id = self._after or (None, None)
            params = {
                "now": self.now,
                "limit": self.limit,
                "after_time": after_time,
                "after_id": after_id,
            }
            groups = conn.execute(query("firing", "schedule_lock_due"), params).fetchall()
            self.exhausted = sum(len(member_ids(g)) for g in groups) < self.limit
            if groups:
                self._after = max((g["next_fire_time"], max(member_ids(g))) for g in groups)
            return groups

    def stop(self) -> None:
        with self._mutex:
            self.exhausted = True


def member_ids(row: Mapping[str, Any]) -> list[uuid.UUID]:
    ids: list[uuid.UUID] = row["ids"] or [row["id"]]
    return ids
