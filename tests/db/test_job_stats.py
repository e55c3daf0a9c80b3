"""Per-job statistics over the last 24 hours, from runs with known durations."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from app.handlers.jobs import Outcome, OutcomeStatus
from app.observability import job_stats
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.job_stats import ended
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]


def test_per_job_figures_and_hourly_series_most_failing_first(conn: Conn) -> None:
    now = db_now(conn)
    for i in range(10):
        ended(conn, "fast", 0.1 * (i + 1), at=now - timedelta(minutes=5))
    ended(conn, "flaky", 2, at=now - timedelta(hours=3, minutes=5))
    ended(conn, "flaky", 4, at=now - timedelta(minutes=5), ok=False)
    ended(conn, "old", 1, at=now - timedelta(hours=30))  # outside the window
    report = job_stats.stats(conn, now=now)
    assert report.through is not None and report.window_start is not None
    assert [s.name for s in report.jobs] == ["flaky", "fast"]
    flaky, fast = report.jobs
    assert (flaky.runs, flaky.failures, flaky.failure_rate) == (2, 1, 0.5)
    # hourly series by clock hour, the window's first hour first
    hour = int((now - timedelta(minutes=5) - report.window_start).total_seconds() // 3600)
    earlier = int(
        (now - timedelta(hours=3, minutes=5) - report.window_start).total_seconds() // 3600
    )
    assert flaky.failures_hourly[hour] == 1 and flaky.runs_hourly[earlier] == 1
    assert sum(flaky.runs_hourly) == 2 and len(flaky.runs_hourly) == job_stats.HOURS
    assert fast.runs == 10 and fast.failure_rate == 0
    # percentile_cont gives 0.55 and 0.955; the histogram is within its stated precision
    precision = job_stats.PRECISION_PERCENT / 100
    assert fast.p50 is not None and abs(fast.p50 - 0.55) <= 0.55 * precision
    assert fast.p95 is not None and abs(fast.p95 - 0.955) <= 0.955 * precision
    assert flaky.p50 is not None and abs(flaky.p50 - 3.0) <= 3.0 * precision
    assert flaky.p95 is not None and abs(flaky.p95 - 3.9) <= 3.9 * precision
    slowest = job_stats.stats(conn, sort="slowest", now=now).jobs
    assert [s.name for s in slowest] == ["flaky", "fast"]
    busiest = job_stats.stats(conn, sort="busiest", now=now).jobs
    assert [s.name for s in busiest] == ["fast", "flaky"]


def test_retries_count_attempts_after_the_first(conn: Conn) -> None:
    now = db_now(conn)
    run_id = submission.submit(conn, NewRun("retried", max_retries=3)).id
    for attempt in (1, 2):
        (job,) = transitions.claim(conn, "w", 1, 30, now=now + timedelta(hours=attempt))
        failure = Outcome(OutcomeStatus.FAILED, error="again", retryable=attempt == 1)
        transitions.finish_many(
            conn, "w", [Finish(run_id, job.attempt, failure)], now=now + timedelta(hours=attempt)
        )
    (stats,) = job_stats.stats(conn, now=now + timedelta(hours=3)).jobs
    assert (stats.runs, stats.retries, stats.failures) == (1, 1, 1)
