"""The fleet reading behind /metrics, straight from the database: lease expiries and the
reaper's re-queues are counted from the reaper's own record of each lost attempt."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from app.observability import metrics
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from tests.helpers.processes import one_crash_from_quarantine
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]


def samples(conn: Conn) -> dict[str, float]:
    text = metrics.read_fleet(conn, 300.0).decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels
    }


def test_a_lost_attempt_counts_as_requeued_only_when_the_reaper_put_the_run_back(
    conn: Conn,
) -> None:
    retried = submission.submit(conn, NewRun("noop", max_retries=1)).id
    transitions.claim(conn, "w", 10, 30)
    later = db_now(conn) + timedelta(seconds=60)
    assert [r.status for r in transitions.reap(conn, now=later)] == ["pending"]
    # The re-queued run is claimed again and its worker dies too: at its crash limit, it
    # is quarantined.
    one_crash_from_quarantine(conn, retried)
    transitions.claim(conn, "w2", 10, 30, now=later)
    assert [r.status for r in transitions.reap(conn, now=later + timedelta(seconds=60))] == [
        "failed"
    ]
    ended = submission.submit(conn, NewRun("noop", max_retries=0)).id
    one_crash_from_quarantine(conn, ended)
    transitions.claim(conn, "w3", 10, 30)
    assert [r.status for r in transitions.reap(conn, now=db_now(conn) + timedelta(seconds=60))] == [
        "failed"
    ]

    lost = conn.execute(
        "SELECT run_id, attempt, requeued FROM job_run_attempts WHERE outcome = 'lost' "
        "ORDER BY run_id, attempt"
    ).fetchall()
    assert [(r["run_id"], r["attempt"], r["requeued"]) for r in lost] == [
        (retried, 1, True),
        (retried, 2, False),
        (ended, 1, False),
    ]
    figures = samples(conn)
    assert figures["sundial_lease_expiries_total"] == 3
    assert figures["sundial_reaper_requeues_total"] == 1
