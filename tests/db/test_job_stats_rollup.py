"""The per-job statistics roll-up equals a direct computation over the runs: as minutes
close, as hours leave the window, with endings that commit late, and with two fillers."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.core.sql import query
from app.observability import job_stats
from tests.helpers.job_stats import ended
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]

# What the page used to compute from the runs, over the roll-up's window.
DIRECT = """
SELECT handler, count(*)::int AS runs,
       count(*) FILTER (WHERE status = 'completed')::int AS completed,
       count(*) FILTER (WHERE status IN ('failed', 'timed_out'))::int AS failures,
       sum(greatest(attempt - 1, 0))::int AS retries,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at))
           FILTER (WHERE started_at IS NOT NULL) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at))
           FILTER (WHERE started_at IS NOT NULL) AS p95
FROM job_runs
WHERE finished_at >= %(since)s AND finished_at < %(until)s
GROUP BY handler
"""


def assert_matches_runs(conn: Conn, report: job_stats.Report) -> None:
    assert report.through is not None and report.window_start is not None
    direct = {
        r["handler"]: r
        for r in conn.execute(
            DIRECT, {"since": report.window_start, "until": report.through}
        ).fetchall()
    }
    rolled = {s.handler: s for s in report.jobs}
    assert set(rolled) == set(direct)
    precision = job_stats.PRECISION_PERCENT / 100
    for handler, want in direct.items():
        got = rolled[handler]
        counts = (got.runs, got.completed, got.failures, got.retries)
        assert counts == (want["runs"], want["completed"], want["failures"], want["retries"])
        for q in ("p50", "p95"):
            assert abs(getattr(got, q) - float(want[q])) <= float(want[q]) * precision, handler


def at_minute(conn: Conn) -> datetime:
    """A whole hour a few hours back, so the script can move time on from there."""
    return db_now(conn).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)


def test_minutes_close_and_hours_leave_the_window(conn: Conn) -> None:
    base = at_minute(conn)
    ended(conn, "billing", 0.2, at=base - timedelta(hours=20))
    ended(conn, "billing", 1.5, at=base - timedelta(hours=2), ok=False)
    ended(conn, "billing", 0.4, at=base - timedelta(hours=22, minutes=30))  # leaves first
    ended(conn, "export", 12, at=base - timedelta(minutes=50))
    ended(conn, "export", 30, at=base - timedelta(minutes=20))
    ended(conn, "old", 1, at=base - timedelta(hours=30))  # never in the window
    ended(conn, "billing", 0.3, at=base + timedelta(minutes=9, seconds=50))  # open minute

    first = job_stats.stats(conn, now=base + timedelta(minutes=10))
    assert first.through == base + timedelta(minutes=9)
    assert_matches_runs(conn, first)
    assert {s.handler: s.runs for s in first.jobs} == {"billing": 3, "export": 2}

    closed = job_stats.stats(conn, now=base + timedelta(minutes=11))  # its minute closed
    assert closed.through == base + timedelta(minutes=10)
    assert_matches_runs(conn, closed)
    assert {s.handler: s.runs for s in closed.jobs} == {"billing": 4, "export": 2}

    later = job_stats.stats(conn, now=base + timedelta(hours=1, minutes=5))  # an hour on
    assert later.window_start == first.window_start + timedelta(hours=1)  # type: ignore[operator]
    assert_matches_runs(conn, later)
    assert {s.handler: s.runs for s in later.jobs} == {"billing": 3, "export": 2}
    # the hour that left stays in the roll-up for the week's duration trend, out of the sums
    left = conn.execute(
        "SELECT count(*) AS n FROM job_stat_hours WHERE hour < %s", (later.window_start,)
    ).fetchone()
    assert left == {"n": 1}

    idle = job_stats.stats(conn, now=base + timedelta(hours=40))  # nothing for a day
    assert idle.jobs == [] and idle.through == base + timedelta(hours=39, minutes=59)


def test_an_ending_that_commits_within_the_grace_is_counted_once(conn: Conn) -> None:
    base = at_minute(conn)
    ended(conn, "sync", 1, at=base + timedelta(minutes=3))
    now = base + timedelta(minutes=5, seconds=20)  # minutes up to :04 are closed
    before = job_stats.stats(conn, now=now)
    assert before.through == base + timedelta(minutes=4)
    # stamped at :04:40, committed after that fill: its minute was not closed yet
    ended(conn, "sync", 2, at=base + timedelta(minutes=4, seconds=40), ok=False)
    assert_matches_runs(conn, job_stats.stats(conn, now=now))
    after = job_stats.stats(conn, now=base + timedelta(minutes=6))
    assert_matches_runs(conn, after)
    (sync,) = after.jobs
    assert (sync.runs, sync.failures) == (2, 1)
    # the stated limit: an ending stamped before the last closed minute that commits
    # later than the grace is not counted (a finish's transaction is never that long)
    ended(conn, "sync", 3, at=base + timedelta(minutes=2))
    (sync,) = job_stats.stats(conn, now=base + timedelta(minutes=7)).jobs
    assert sync.runs == 2


def test_a_reader_does_not_wait_for_a_filler_and_two_fillers_add_each_minute_once(
    conn: Conn, db_url: str
) -> None:
    base = at_minute(conn)
    for minute in range(30):
        ended(
            conn, f"job-{minute % 3}", 0.1 * (1 + minute % 7), at=base + timedelta(minutes=minute)
        )
    job_stats.fill(conn, now=base + timedelta(minutes=10))
    with psycopg.connect(db_url, row_factory=dict_row) as filling:  # holds the fill lock
        held = filling.execute(
            query("job_stats", "job_stats_state_lock"),
            {"now": base + timedelta(minutes=20), "grace": job_stats.GRACE_SECONDS},
        ).fetchone()
        assert held is not None
        report = job_stats.stats(conn, now=base + timedelta(minutes=20))  # no wait
        assert report.through == base + timedelta(minutes=9)
        assert_matches_runs(conn, report)
        filling.rollback()

    moments = [base + timedelta(minutes=m, seconds=40) for m in range(10, 40)]
    errors: list[BaseException] = []

    def filler() -> None:
        try:
            with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as own:
                for moment in moments:
                    job_stats.fill(own, now=moment)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=filler) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = job_stats.stats(conn, now=moments[-1])
    assert final.through == base + timedelta(minutes=39)
    assert_matches_runs(conn, final)
    assert sum(s.runs for s in final.jobs) == 30


def test_a_clock_set_back_by_more_than_an_hour_starts_the_roll_up_again(conn: Conn) -> None:
    base = at_minute(conn)
    ended(conn, "nightly", 5, at=base - timedelta(hours=1))
    ahead = job_stats.stats(conn, now=base + timedelta(hours=3))
    assert ahead.through == base + timedelta(hours=2, minutes=59)
    slightly = job_stats.stats(conn, now=base + timedelta(hours=2, minutes=30))  # kept
    assert slightly.through == ahead.through
    back = job_stats.stats(conn, now=base + timedelta(minutes=10))
    assert back.through == base + timedelta(minutes=9)
    assert_matches_runs(conn, back)
