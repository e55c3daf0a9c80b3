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
SCAN_LIMIT = 200_000
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
    """Every job with runs in the window, sorted (most failing, slowest or busiest
    first), and whether the window held more runs than the bounded scan read."""
    params: dict[str, Any] = {"now": now, "hours": HOURS, "scan_limit": SCAN_LIMIT}
    rows = conn.execute(query("job_stats", "job_stats_summary"), params).fetchall()
    hourly = conn.execute(query("job_stats", "job_stats_hourly"), params).fetchall()
    series: dict[tuple[Any, str], tuple[list[int], list[int]]] = {}
    for h in hourly:
        runs, failures = series.setdefault((h["job_id"], h["handler"]), ([0] * HOURS, [0] * HOURS))
        if 0 <= h["hours_ago"] < HOURS:
            runs[HOURS - 1 - h["hours_ago"]] += h["runs"]
            failures[HOURS - 1 - h["hours_ago"]] += h["failures"]
    result = []
    for r in rows:
        runs, failures = series.get((r["job_id"], r["handler"]), ([0] * HOURS, [0] * HOURS))
        result.append(JobStats(**r, runs_hourly=runs, failures_hourly=failures))
    result.sort(key=_sort_key(sort))
    return result, sum(r.runs for r in result) >= SCAN_LIMIT


def _sort_key(sort: str) -> Any:
    if sort == "slowest":
        return lambda s: (-(s.p95 or 0), -s.failure_rate, s.name)
    if sort == "busiest":
        return lambda s: (-s.runs, s.name)
    return lambda s: (-s.failure_rate, -s.failures, -(s.p95 or 0), s.name)
