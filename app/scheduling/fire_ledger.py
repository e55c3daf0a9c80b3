"""The fire ledger: one row per intended fire of a schedule, with the decision taken."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core.db import Conn
from app.core.json_rows import iso_text, json_rows
from app.core.sql import query
from app.scheduling.fire_decisions import (
    FireOutcome,
)


@dataclass(frozen=True, slots=True)
class FireRecord:
    """One ledger row to write. `link` is the fire time of the run (or DAG run) the row
    links, a run made earlier in the same transaction."""

    schedule_id: uuid.UUID
    fire_time: datetime
    local_time: datetime
    outcome: FireOutcome
    link: datetime | None = None
    coalesced_count: int = 0
    manual: bool = False
    detail: str | None = None
    run_id: int | None = None  # the linked run, when known (saves looking it up)
    backfill_id: uuid.UUID | None = None  # the backfill that ran this fire


def record_fires(conn: Conn, records: list[FireRecord], now: datetime | None = None) -> None:
    """Write ledger rows in one statement; fires already recorded are left alone."""
    if records:
        rows = json_rows(fire_rows(records))
        params = {"fires": rows, "shared": None, "now": now}
        conn.execute(query("firing", "fire_record_many"), params)


def fire_rows(records: list[FireRecord]) -> list[dict[str, Any]]:
    """The JSON rows of ledger records."""
    iso: dict[datetime, str] = {}
    return [
        {
            "schedule_id": str(r.schedule_id),
            "fire_time": iso_text(iso, r.fire_time),
            "local_time": iso_text(iso, r.local_time),
            "outcome": r.outcome.value,
            "link": None if r.link is None else iso_text(iso, r.link),
            "coalesced_count": r.coalesced_count,
            "manual": r.manual,
            "detail": r.detail,
            "run_id": r.run_id,
            "backfill_id": None if r.backfill_id is None else str(r.backfill_id),
        }
        for r in records
    ]
