"""Where the time went, over the JSON API: a DAG run's timeline and a job's week of
durations, read from runs moved by the real transitions, matching the OpenAPI document."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from app.catalog import job_definitions
from app.catalog.job_definitions import JobSpec
from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.api_client import assert_documented, make_token, request
from tests.helpers.job_stats import ended
from tests.helpers.waits import db_now


def test_a_dag_runs_timeline_and_a_jobs_durations(
    live_server: str, db_url: str, conn: psycopg.Connection[Any]
) -> None:
    dag = dag_submission.submit_dag(
        conn, {"a": NewRun("noop", max_retries=1), "b": NewRun("noop")}, [("a", "b")],
        name="etl",
    )  # fmt: skip
    row = conn.execute("SELECT created_at FROM job_runs WHERE id = %s", (dag.run_ids["a"],))
    t0 = row.fetchone()["created_at"]  # type: ignore[index]
    for claim_at, end_at, outcome in (
        (1, 3, Outcome(OutcomeStatus.FAILED, error="busy", retryable=True)),
        (8, 12, Outcome.completed()),
        (13, 15, Outcome.completed()),  # b
    ):
        (c,) = transitions.claim(conn, "w", 1, 300, now=t0 + timedelta(seconds=claim_at))
        transitions.finish_many(conn, "w", [Finish(c.run_id, c.attempt, outcome)],
                                now=t0 + timedelta(seconds=end_at))  # fmt: skip
    token = make_token(db_url, "viewer", "read")
    got = request(live_server, "GET", f"/api/v1/dags/{dag.id}/timeline", token)
    assert got.status == 200, got.body
    assert_documented(live_server, token, "DagTimelineOut", got.body)
    a, b = got.body["steps"]
    assert [(s["kind"], s["seconds"], s["attempt"]) for s in a["segments"]] == [
        ("queued", 1.0, None), ("failed", 2.0, 1), ("retrying", 5.0, None), ("ran", 4.0, 2),
    ]  # fmt: skip
    assert (a["retries"], a["failed_attempts"], a["ran_seconds"]) == (1, 1, 6.0)
    assert (b["upstreams"], b["waited_seconds"], b["queued_seconds"]) == (["a"], 12.0, 1.0)
    assert (got.body["seconds"], got.body["live"]) == (15.0, False)
    assert got.body["longest_chain"] == ["a", "b"]
    missing = "/api/v1/dags/00000000-0000-0000-0000-000000000000/timeline"
    assert request(live_server, "GET", missing, token).status == 404

    job_definitions.create(conn, JobSpec(name="billing", handler="noop"), actor="test")
    job_id = job_definitions.get(conn, "billing")["id"]
    slow = ended(conn, "noop", 30, at=db_now(conn) - timedelta(hours=2), job_id=job_id)
    durations = request(live_server, "GET", "/api/v1/jobs/billing/durations", token)
    assert durations.status == 200, durations.body
    assert_documented(live_server, token, "JobDurationsOut", durations.body)
    (hour,) = durations.body["hours"]
    assert (hour["runs"], hour["p50_seconds"], hour["p95_seconds"]) == (1, 30.0, 30.0)
    assert [(r["run_id"], r["seconds"]) for r in durations.body["slowest"]] == [(slow, 30.0)]
    assert request(live_server, "GET", "/api/v1/jobs/nope/durations", token).status == 404
