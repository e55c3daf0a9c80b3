"""How long one job's runs took over the last week: p50 and p95 of the run duration per
clock hour, and the slowest runs, for the job's page and the JSON API.

Both come from the per-job statistics roll-up (`app.observability.job_stats`), which keeps
each job's hourly duration histograms for a week: the hourly figures are read from those
histograms (within ±2.2 %, like the statistics page), and the slowest runs are looked for
only in the hours whose longest run was longest, so neither read grows with the job's
number of runs. Durations are of the attempt that ended (start to end), by the hour the
run ended; endings count once their minute has closed, as on the statistics page.

    trend = durations(conn, job_id)
    trend.hours[-1].p95, trend.slowest[0].run_id
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.core.db import Conn
from app.core.sql import query
from app.observability import job_stats

DAYS = 7
SLOWEST = 10


@dataclass(frozen=True, slots=True)
class HourDurations:
    hour: datetime
    runs: int
    p50: float | None  # seconds
    p95: float | None


@dataclass(frozen=True, slots=True)
class SlowRun:
    run_id: int
    status: str
    attempt: int
    started_at: datetime
    finished_at: datetime
    seconds: float


@dataclass(frozen=True, slots=True)
class Durations:
    since: datetime  # the first hour shown
    through: datetime | None  # endings before this are counted (None: nothing filled yet)
    hours: list[HourDurations]  # only the hours with endings, oldest first
    slowest: list[SlowRun]  # slowest first

    @property
    def runs(self) -> int:
        return sum(h.runs for h in self.hours)


def durations(conn: Conn, job_id: uuid.UUID, *, now: datetime | None = None) -> Durations:
    """The job's hourly p50/p95 and its SLOWEST runs over the last DAYS, after adding the
    minutes closed since the last fill of the roll-up."""
    job_stats.fill(conn, now=now)
    clock = conn.execute(
        query("job_stats", "job_stats_state_due"),
        {"now": now, "grace": job_stats.GRACE_SECONDS},
    ).fetchone()
    assert clock is not None  # fill made the state row
    through: datetime | None = clock["through"]
    closed: datetime = clock["closed"]
    last_hour = (closed - timedelta(microseconds=1)).replace(minute=0, second=0, microsecond=0)
    since = last_hour - timedelta(hours=DAYS * 24 - 1)
    params = {"job_key": job_id, "since": since, "per_octave": job_stats.BUCKETS_PER_DOUBLING}
    hours = [
        HourDurations(r["hour"], r["runs"], r["p50"], r["p95"])
        for r in conn.execute(query("job_stats", "job_durations_hourly"), params).fetchall()
    ]
    slowest = [
        SlowRun(r["id"], r["status"], r["attempt"], r["started_at"], r["finished_at"], r["seconds"])
        for r in conn.execute(
            query("job_stats", "job_durations_slowest"), {**params, "limit": SLOWEST}
        ).fetchall()
    ]
    return Durations(since, through, hours, slowest)
