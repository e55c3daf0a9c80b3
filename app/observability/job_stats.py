"""Per-job statistics for on-call: over the last 24 hours, per job definition (or handler,
for runs submitted without one), runs per hour, duration p50/p95, failure rate and
retries, with hourly series for sparklines.

"Runs" are run endings (completed, failed, timed out, cancelled, skipped) by their
`finished_at`; durations are of the attempt that ended (start to end); retries count
attempts after the first.

Why a roll-up: reading the day's runs costs as much as the day held (a second at
100,000 endings). Instead `fill` adds each closed minute's endings, once, to per-job
hourly rows and duration histograms, and keeps each job's sums over the window in one
row, so the page reads one row per job (see `app/core/sql/job_stats.sql`). Nothing is added
to finishing a run.

- Closed minutes: a minute closes `GRACE_SECONDS` after it ends (a finish is stamped
  when its transaction starts and is visible when it commits); the figures cover the
  window's hours up to the last closed minute, which the page states. An ending that
  becomes visible later than that is not counted.
- The window: the `HOURS` clock hours ending with the last closed minute's hour (23 to
  24 hours); per hour rates divide by its length.
- Durations: p50/p95 are read from log-scale histograms with 16 buckets per doubling,
  so a figure is within ±2.2 % of the duration at that rank (exact for a job whose runs
  all took the same time); they interpolate between ranks like `percentile_cont`.
- Kept: the hourly rows of the last KEEP_HOURS (a week), for each job's duration trend
  (`app.observability.job_durations`); the window sums only its own hours. A roll-up not
  filled for a whole window (no reaper for a day) starts again from the window's start.
- Who fills: the reaper on every pass, and a reader when a minute closed since; a
  filler locks the one state row with SKIP LOCKED, so two never add a minute twice and
  a reader never waits for one. A manual retry does not take back the ending it
  follows: the roll-up counts endings as they happened.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.core.db import Conn
from app.core.sql import query

HOURS = 24
# Hours kept in the roll-up: the window's, and the week before for each job's duration
# trend (`app.observability.job_durations`).
KEEP_HOURS = 7 * 24
JOBS_SHOWN = 50
SORTS = ("failing", "slowest", "busiest")
GRACE_SECONDS = 30
BUCKETS_PER_DOUBLING = 16  # duration precision: 2^(1/32) - 1 = ±2.2 %
PRECISION_PERCENT = 2.2
CLOCK_BACK_LIMIT = timedelta(hours=1)


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
    hours: float = HOURS  # the window's length

    @property
    def name(self) -> str:
        return self.job_name or self.handler

    @property
    def failure_rate(self) -> float:
        ended = self.completed + self.failures
        return self.failures / ended if ended else 0.0

    @property
    def per_hour(self) -> float:
        return self.runs / self.hours if self.hours else 0.0


@dataclass(frozen=True, slots=True)
class Report:
    jobs: list[JobStats]
    through: datetime | None  # endings before this are counted (None: nothing filled yet)
    window_start: datetime | None

    @property
    def hours(self) -> float:
        if self.through is None or self.window_start is None:
            return float(HOURS)
        return (self.through - self.window_start).total_seconds() / 3600


def _q(name: str) -> Any:
    return query("job_stats", name)


def fill(conn: Conn, *, now: datetime | None = None) -> bool:
    """Add the endings of the minutes closed since the last fill to the roll-up, in one
    transaction; False when there was nothing to add or another filler was at it."""
    due = conn.execute(_q("job_stats_state_due"), {"now": now, "grace": GRACE_SECONDS}).fetchone()
    if due is None:
        conn.execute(_q("job_stats_state_create"))
    elif _filled(due["through"], due["closed"]):
        return False  # the common case: checked without a lock or a write
    with conn.transaction():
        state = conn.execute(
            _q("job_stats_state_lock"), {"now": now, "grace": GRACE_SECONDS}
        ).fetchone()
        if state is None:  # another filler holds the lock: it adds these minutes
            return False
        closed: datetime = state["closed"]
        through: datetime | None = state["through"]
        if _filled(through, closed):
            return False
        window_start = _window_start(closed)
        if through is None or through < window_start or through > closed:
            conn.execute(_q("job_stats_reset"))
            through = window_start
        span = {"since": through, "until": closed, "per_octave": BUCKETS_PER_DOUBLING}
        conn.execute(_q("job_stats_fill_hours"), span)
        conn.execute(_q("job_stats_fill_durations"), span)
        left_since = min(state["window_start"] or window_start, window_start)
        conn.execute(
            _q("job_stats_window_refresh"),
            {**span, "window_start": window_start, "left_since": left_since},
        )
        if state["window_start"] != window_start:
            conn.execute(_q("job_stats_window_drop"), {"window_start": window_start})
            keep_since = window_start - timedelta(hours=KEEP_HOURS - HOURS)
            conn.execute(_q("job_stats_prune"), {"keep_since": keep_since})
        conn.execute(_q("job_stats_state_save"), {"through": closed, "window_start": window_start})
    return True


def filled_through(conn: Conn) -> datetime | None:
    """The end of the last minute the roll-up has added (None: it has never filled). The
    reaper moves no run that ended after it out of the hot tables, which fills read."""
    row = conn.execute(_q("job_stats_state_due"), {"now": None, "grace": GRACE_SECONDS}).fetchone()
    return None if row is None else row["through"]


def _filled(through: datetime | None, closed: datetime) -> bool:
    """Nothing to add: no minute closed since `through`. A `through` more than
    CLOCK_BACK_LIMIT ahead of the clock (it was set back, or a fill was given a time far
    ahead) starts the roll-up again rather than leaving it stale until the clock gets
    there."""
    return through is not None and through - CLOCK_BACK_LIMIT <= closed <= through


def _window_start(closed: datetime) -> datetime:
    """The first of the HOURS clock hours ending with the hour of the last closed minute."""
    last = (closed - timedelta(microseconds=1)).replace(minute=0, second=0, microsecond=0)
    return last - timedelta(hours=HOURS - 1)


def stats(conn: Conn, *, sort: str = "failing", now: datetime | None = None) -> Report:
    """The first JOBS_SHOWN jobs with endings in the window, most failing, slowest or
    busiest first, after adding the minutes closed since the last fill."""
    if sort not in SORTS:
        sort = "failing"
    fill(conn, now=now)
    rows = conn.execute(_q("job_stats_summary"), {"sort": sort, "limit": JOBS_SHOWN}).fetchall()
    if rows:
        report = Report([], rows[0]["through"], rows[0]["window_start"])
    else:
        state = conn.execute(_q("job_stats_filled")).fetchone() or {}
        report = Report([], state.get("through"), state.get("window_start"))
    for r in rows:
        runs, failures = [0] * HOURS, [0] * HOURS
        for index, n, failed in zip(
            r.pop("hour_index") or [],
            r.pop("hour_runs") or [],
            r.pop("hour_failures") or [],
            strict=True,
        ):
            if 0 <= index < HOURS:
                runs[index], failures[index] = n, failed
        del r["through"], r["window_start"]
        report.jobs.append(
            JobStats(**r, runs_hourly=runs, failures_hourly=failures, hours=report.hours)
        )
    return report
