"""The reaper: returns runs whose lease expired to pending (or failed), ages priorities.

Purpose: a worker that dies, stalls or loses its network stops heartbeating; once its
lease expires the reaper hands the run to another worker (or ends it when its attempts
are exhausted, or when it was cancelled). It also raises the effective priority of runs
that have waited too long, so low-priority work cannot starve.

Use: `sundial reaper`; any number may run: each step is a conditional UPDATE over rows
locked with SKIP LOCKED, so two reapers never handle the same run.

Options: SUNDIAL_REAPER_INTERVAL_SECONDS, SUNDIAL_PRIORITY_AGING_SECONDS,
SUNDIAL_PRIORITY_AGING_MAX_BOOST.

Telemetry: `sundial_lease_expiries_total{outcome}`, a log line per reaped run.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from app import runs
from app.config import Settings
from app.metrics import LEASE_EXPIRIES
from app.services.periodic import run_periodic

log = logging.getLogger(__name__)

REAP_BATCH = 1000


@dataclass(frozen=True)
class ReaperReport:
    reaped: list[runs.Reaped]
    aged: int


class Reaper:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run_once(
        self, conn: psycopg.Connection[dict[str, Any]], now: datetime | None = None
    ) -> ReaperReport:
        reaped: list[runs.Reaped] = []
        while True:
            batch = runs.reap(conn, limit=REAP_BATCH, now=now)
            reaped += batch
            if len(batch) < REAP_BATCH:
                break
        for r in reaped:
            LEASE_EXPIRIES.labels(r.status).inc()
        aged = runs.age_priorities(
            conn,
            age_seconds=self.settings.priority_aging_seconds,
            max_boost=self.settings.priority_aging_max_boost,
            now=now,
        )
        if aged:
            log.info("raised the priority of %d long-waiting runs", aged, extra={"count": aged})
        return ReaperReport(reaped, aged)

    def run_forever(self, url: str, stop: threading.Event) -> None:
        run_periodic("reaper", url, self.settings.reaper_interval_seconds, self.run_once, stop)
