"""The overview and workers pages read what the database holds (TestClient, real
PostgreSQL); the live behaviour is in tests/e2e/test_live.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import run_inserts, submission, transitions
from tests.helpers.waits import db_now


def _conn(db_url: str) -> psycopg.Connection[dict[str, object]]:
    return psycopg.connect(db_url, autocommit=True, row_factory=dict_row)


def test_overview_shows_queue_throughput_lag_leader_and_alerts(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    with _conn(db_url) as conn:
        now = db_now(conn)
        # three due runs at priority 5, one ten minutes overdue
        for minutes in (10, 1, 0):
            submission.submit(conn, run_inserts.NewRun(handler="noop", priority=5,
                                          run_at=now - timedelta(minutes=minutes)))  # fmt: skip
        # a poison job: failed for good after its retry
        poison = submission.submit(
            conn, run_inserts.NewRun(handler="poison", max_retries=1, priority=9)
        ).id
        for attempt in (1, 2):
            conn.execute("UPDATE job_runs SET run_at = now() - interval '1 s' WHERE id = %s",
                         [poison])  # fmt: skip
            claimed = transitions.claim(conn, "w-1", 1, 30)
            assert [c.run_id for c in claimed] == [poison]
            outcome = Outcome(OutcomeStatus.FAILED, error="boom")
            transitions.finish_many(
                conn, "w-1", [transitions.Finish(poison, attempt, outcome)], now=None
            )
        conn.execute(
            "INSERT INTO leader_leases (name, holder, term, lease_until) "
            "VALUES ('trigger', 'trigger-host-1', 7, now() + interval '1 minute')"
        )
    page = as_role("viewer").get("/")
    assert page.status_code == 200
    text = page.text
    assert '<strong id="pending-due">3</strong> due now' in text
    assert '<strong id="oldest-due">10 min' in text
    assert "Job poison failed 1 time in the last hour even after retrying." in text
    assert "The oldest due run has waited 10 min: no worker is running." in text
    assert "<code>trigger-host-1</code>, term 7" in text and "holds the lease" in text
    assert "Schedule lag, last hour" in text and 'class="line-p99"' in text
    assert '<strong id="throughput-last">' in text
    # the counters keep their meaning: all runs by status
    assert 'data-status="failed"' in text


def test_overview_fragment_for_htmx(as_role: Callable[[str], TestClient]) -> None:
    fragment = as_role("viewer").get("/", headers={"HX-Request": "true"})
    assert fragment.text.startswith('<div id="overview-live"')
    assert 'hx-trigger="sse:runs, sse:workers, sse:trigger, sse:clock"' in fragment.text
    assert "All clear" in fragment.text


def test_workers_page_lists_live_workers_and_gone_ones_with_released_runs(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    stats = {"in_flight": 3, "loop_lag_ms": 1.5, "threads_total": 4, "threads_busy": 2,
             "processes_total": 0, "completed": 10, "failed": 1}  # fmt: skip
    with _conn(db_url) as conn:
        conn.execute(
            "INSERT INTO workers (id, host, pid, concurrency, handlers, stats) VALUES "
            "('w-live', 'box-a', 101, 4, '[\"noop\", \"http\"]', %s), "
            "('w-dead', 'box-b', 202, 4, '[\"noop\"]', '{}')",
            [json.dumps(stats)],
        )
        conn.execute("UPDATE workers SET last_seen = now() - interval '5 minutes' "
                     "WHERE id = 'w-dead'")  # fmt: skip
        run_id = submission.submit(conn, run_inserts.NewRun(handler="noop")).id
        transitions.claim(conn, "w-dead", 1, 30)
        conn.execute("UPDATE job_runs SET lease_until = now() - interval '1 s' WHERE id = %s",
                     [run_id])  # fmt: skip
        assert [r.run_id for r in transitions.reap(conn)] == [run_id]
    page = as_role("viewer").get("/workers")
    assert page.status_code == 200
    live, gone = page.text.split("Gone in the last hour")
    assert "<code>w-live</code>" in live and "box-a · 101" in live
    assert "3 of 4 slots (75%)" in live and "2 of 4" in live and "1.5 ms" in live
    assert "noop, http" in live
    assert "w-dead" not in live
    assert "<code>w-dead</code>" in gone and "stopped reporting at" in gone
    assert f'<a href="/runs/{run_id}">#{run_id}</a>' in gone and "lost (lease expired)" in gone


def test_the_hour_by_minute_keeps_past_minutes_and_reads_only_new_ones(db_url: str) -> None:
    from app.web.home import Minutes

    insert = (
        "INSERT INTO job_runs (handler, status, run_at, started_at, finished_at) "
        "SELECT 'noop', 'completed', now() - make_interval(mins => m) - interval '2 s', "
        "now() - make_interval(mins => m), now() - make_interval(mins => m) + interval '1 s' "
        "FROM generate_series(%s::int, %s::int) AS m"
    )
    with _conn(db_url) as conn:
        conn.execute(insert, [5, 30])
        now = db_now(conn)
        kept = Minutes()
        first = kept.read(conn, now)
        assert sum(r["finished"] for r in first) == 26
        assert kept.kept and min(kept.kept) >= now - timedelta(hours=1)
        conn.execute(insert, [0, 0])  # a run in the current minute
        later = db_now(conn)
        again = kept.read(conn, later)
        assert again == Minutes().read(conn, later)  # the same as reading the whole hour
        assert sum(r["finished"] for r in again) == 27
        # Lag belongs to the minute a run started in; a run started in a minute's last
        # second finishes in the next one, whose row then has finishes and no starts.
        assert sum(r["started"] for r in again) == 27
        assert all(abs(r["lag_p50"] - 2.0) < 0.01 for r in again if r["started"])
