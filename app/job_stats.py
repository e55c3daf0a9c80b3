"""Per-job statistics for on-call: over the last 24 hours, per job definition (or handler,
for runs submitted without one), runs per hour, duration p50/p95, failure rate and
retries, with hourly series for sparklines.

"Runs" are runs that ended in the window (completed, failed, timed out, cancelled,
skipped); durations are of their last attempt (start to end); retries count attempts
after the first. The scan is bounded (`SCAN_LIMIT` newest endings): on a day with more,
the figures describe the most recent ones and `partial` says so.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.db import Conn
from app.sql import query

HOURS = 24
SCAN_LIMIT = 100_000
JOBS_SHOWN = 50
SORTS = ("failing", "slowest", "busiest")


@dataclass(frozen=True, slots=True)
class JobStats:
    job_id: uuid.UUID | None
    job_name: str | None
    handler: str
    runs: int
    completed: int
    failures: int
    retries: int
    p50: float | None
    p95: float | None
    runs_hourly: list[int] = field(default_factory=list)  # oldest hour first
    failures_hourly: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.job_name or self.handler

    @property
    def failure_rate(self) -> float:
        ended = self.completed + self.failures
        return self.failures / ended if ended else 0.0

    @property
    def per_hour(self) -> float:
        return self.runs / HOURS


def stats(
    conn: Conn, *, sort: str = "failing", now: datetime | None = None
) -> tuple[list[JobStats], bool]:
    """The first JOBS_SHOWN jobs with runs in the window, most failing, slowest or busiest
    first, and whether the window held more runs than the bounded scan read."""
    if sort not in SORTS:
        sort = "failing"
    params: dict[str, Any] = {
        "now": now, "hours": HOURS, "scan_limit": SCAN_LIMIT, "sort": sort, "limit": JOBS_SHOWN,
    }  # fmt: skip
    rows = conn.execute(query("job_stats", "job_stats_summary"), params).fetchall()
    shown = {"job_ids": [str(r["job_id"] or "") for r in rows],
             "handlers": [r["handler"] for r in rows]}  # fmt: skip
    hourly = conn.execute(query("job_stats", "job_stats_hourly"), {**params, **shown}).fetchall()
    series: dict[tuple[Any, str], tuple[list[int], list[int]]] = {}
    for h in hourly:
        runs, failures = series.setdefault((h["job_id"], h["handler"]), ([0] * HOURS, [0] * HOURS))
        if 0 <= h["hours_ago"] < HOURS:
            runs[HOURS - 1 - h["hours_ago"]] += h["runs"]
            failures[HOURS - 1 - h["hours_ago"]] += h["failures"]
    result, scanned = [], 0
    for r in rows:
        scanned = r.pop("scanned")
        runs, failures = series.get((r["job_id"], r["handler"]), ([0] * HOURS, [0] * HOURS))
        result.append(JobStats(**r, runs_hourly=runs, failures_hourly=failures))
    return result, scanned >= SCAN_LIMIT
