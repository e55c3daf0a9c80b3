"""One job's duration trend over the week (app.observability.job_durations): hourly p50/p95
from the statistics roll-up, which now keeps a week of hours, and the slowest runs, from
runs ended through the real transitions at chosen times."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

from app.catalog import job_definitions
from app.catalog.job_definitions import JobSpec
from app.observability import job_durations, job_stats
from tests.helpers.job_stats import ended
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]
PRECISION = job_stats.PRECISION_PERCENT / 100


def _walk(conn: Conn, job_id: Any, start: datetime, end: datetime) -> job_durations.Durations:
    """Read the trend every 20 hours from `start` to `end`, as a reaper filling the roll-up
    at least once a day would."""
    at = start
    while at < end:
        job_durations.durations(conn, job_id, now=at)
        at += timedelta(hours=20)
    return job_durations.durations(conn, job_id, now=end)


def test_hourly_percentiles_and_the_slowest_runs_of_the_week(conn: Conn) -> None:
    job_definitions.create(conn, JobSpec(name="report", handler="noop"), actor="test")
    job_definitions.create(conn, JobSpec(name="other", handler="noop"), actor="test")
    job_id = job_definitions.get(conn, "report")["id"]
    other_id = job_definitions.get(conn, "other")["id"]
    base = db_now(conn).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
    hour_a, hour_b, hour_c = (base - timedelta(hours=h) for h in (72, 30, 2))
    ids: dict[float, int] = {}
    for seconds in (2, 4, 6):
        ids[seconds] = ended(conn, "noop", seconds, at=hour_a + timedelta(minutes=10),
                             job_id=job_id)  # fmt: skip
    ids[50] = ended(conn, "noop", 50, at=hour_b + timedelta(minutes=30), job_id=job_id, ok=False)
    ones = [ended(conn, "noop", 1, at=hour_c + timedelta(minutes=m), job_id=job_id)
            for m in (1, 2, 3, 4)]  # fmt: skip
    for seconds in (10, 20, 30):
        ids[seconds] = ended(conn, "noop", seconds, at=hour_c + timedelta(minutes=40),
                             job_id=job_id)  # fmt: skip
    ended(conn, "noop", 100, at=hour_c + timedelta(minutes=40), job_id=other_id)
    ended(conn, "noop", 200, at=hour_c + timedelta(minutes=40))  # no job

    trend = _walk(conn, job_id, hour_a + timedelta(minutes=15), base + timedelta(minutes=10))
    assert trend.through == base + timedelta(minutes=9)
    assert trend.since == base - timedelta(hours=7 * 24 - 1)
    assert [(h.hour, h.runs) for h in trend.hours] == [(hour_a, 3), (hour_b, 1), (hour_c, 7)]
    a, b, _ = trend.hours
    assert a.p50 is not None and abs(a.p50 - 4) <= 4 * PRECISION
    assert a.p95 is not None and abs(a.p95 - 5.8) <= 5.8 * PRECISION
    assert (b.p50, b.p95) == (50, 50)  # one run: exact (clamped to the hour's longest)
    assert trend.runs == 11
    assert [round(s.seconds) for s in trend.slowest] == [50, 30, 20, 10, 6, 4, 2, 1, 1, 1]
    assert [s.run_id for s in trend.slowest] == [
        ids[50], ids[30], ids[20], ids[10], ids[6], ids[4], ids[2], *ones[:3],
    ]  # fmt: skip
    assert trend.slowest[0].status == "failed"

    # a week on, hour A has left the roll-up: the trend and the slowest runs follow
    later = _walk(conn, job_id, base + timedelta(hours=20), base + timedelta(hours=100))
    assert [h.hour for h in later.hours] == [hour_b, hour_c]
    assert ids[6] not in [s.run_id for s in later.slowest] and len(later.slowest) == 8
    kept = conn.execute(
        "SELECT count(*) AS n FROM job_stat_hours WHERE hour <= %s", (hour_a,)
    ).fetchone()
    assert kept == {"n": 0}
    # the statistics page's window still sums its own day only
    assert job_stats.stats(conn, now=base + timedelta(hours=100)).jobs == []


def test_a_job_without_endings_has_an_empty_trend(conn: Conn) -> None:
    job_definitions.create(conn, JobSpec(name="quiet", handler="noop"), actor="test")
    trend = job_durations.durations(conn, job_definitions.get(conn, "quiet")["id"])
    assert (trend.hours, trend.slowest, trend.runs) == ([], [], 0)
