"""A completion recorded after the reaper declared its attempt dead (an outage longer than
the lease): accepted while no newer attempt exists, DAG dependents released with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.processes import QUARANTINE_DEATHS, finish_run, one_crash_from_quarantine

Conn = psycopg.Connection[Any]
LATER = timedelta(minutes=10)  # past any lease the tests take


def claim_only(conn: Conn, run_id: int, worker: str = "w") -> int:
    """Claim exactly that run (it must be pending and due); its attempt number."""
    conn.execute("UPDATE job_runs SET priority = 100 WHERE id = %s", (run_id,))
    (job,) = transitions.claim(conn, worker, 1, 30)
    assert job.run_id == run_id
    return job.attempt


def reap_all(conn: Conn) -> list[transitions.Reaped]:
    return transitions.reap(conn, now=datetime.now(UTC) + LATER)


def row(conn: Conn, run_id: int) -> dict[str, Any]:
    found: dict[str, Any] = conn.execute(
        "SELECT * FROM job_runs WHERE id = %s", (run_id,)
    ).fetchone()
    return found


def history(conn: Conn, run_id: int) -> list[tuple[int, str]]:
    rows = conn.execute(
        "SELECT attempt, outcome FROM job_run_attempts WHERE run_id = %s ORDER BY attempt",
        (run_id,),
    ).fetchall()
    return [(r["attempt"], r["outcome"]) for r in rows]


def completed(run_id: int, attempt: int, result: Any = "late") -> Finish:
    return Finish(run_id, attempt, Outcome.completed(result))


def test_a_last_attempt_declared_dead_is_completed_by_its_late_result(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop", max_retries=0)).id
    one_crash_from_quarantine(conn, run_id)
    attempt = claim_only(conn, run_id)
    (reaped,) = reap_all(conn)
    assert reaped.status == "failed" and reaped.quarantined
    error = row(conn, run_id)["last_error"]
    assert error.startswith(f"quarantined after {QUARANTINE_DEATHS} crashes")
    won = transitions.finish_many(conn, "w", [completed(run_id, attempt, {"answer": 42})])
    assert [f.run_id for f in won] == [run_id]
    after = row(conn, run_id)
    assert after["status"] == "completed" and after["result"] == {"answer": 42}
    assert after["last_error"] is None and after["attempt"] == attempt
    assert history(conn, run_id) == [(attempt, "completed")]


def test_a_requeued_run_not_yet_claimed_again_takes_the_late_result(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop", max_retries=3)).id
    attempt = claim_only(conn, run_id)
    (reaped,) = reap_all(conn)
    assert reaped.status == "pending"
    assert transitions.finish_many(conn, "w", [completed(run_id, attempt)])
    assert row(conn, run_id)["status"] == "completed"
    assert transitions.claim(conn, "w2", 10, 30) == []


def test_a_newer_attempt_refuses_the_late_result(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop", max_retries=3)).id
    first = claim_only(conn, run_id)
    reap_all(conn)
    second = claim_only(conn, run_id)
    assert second == first + 1
    assert transitions.finish_many(conn, "w", [completed(run_id, first)]) == []
    after = row(conn, run_id)
    assert after["status"] == "running" and after["attempt"] == second


def test_only_completions_are_taken_late_and_never_over_a_cancel(conn: Conn) -> None:
    failing = submission.submit(conn, NewRun("noop", max_retries=0)).id
    one_crash_from_quarantine(conn, failing)
    failing_attempt = claim_only(conn, failing)
    cancelled = submission.submit(conn, NewRun("noop", max_retries=0)).id
    cancelled_attempt = claim_only(conn, cancelled, "w2")
    transitions.cancel(conn, cancelled)  # a person cancels while it runs
    reap_all(conn)
    late_failure = Finish(failing, failing_attempt, Outcome(OutcomeStatus.FAILED, error="x"))
    won = transitions.finish_many(
        conn, "w", [late_failure, completed(cancelled, cancelled_attempt)]
    )
    assert won == []
    assert row(conn, failing)["status"] == "failed"
    assert row(conn, cancelled)["status"] == "cancelled"


def test_a_dag_step_completed_late_releases_the_steps_its_death_skipped(conn: Conn) -> None:
    nodes = {name: NewRun("noop", max_retries=0) for name in "ABC"}
    dag = dag_submission.submit_dag(conn, nodes, [("A", "B"), ("B", "C")])
    a = dag.run_ids["A"]
    one_crash_from_quarantine(conn, a)
    attempt = claim_only(conn, a)
    reap_all(conn)
    assert row(conn, dag.run_ids["B"])["status"] == "skipped"
    assert transitions.finish_many(conn, "w", [completed(a, attempt)])
    assert row(conn, a)["status"] == "completed"
    assert row(conn, dag.run_ids["B"])["status"] == "pending"
    assert row(conn, dag.run_ids["C"])["status"] == "blocked"
    finish_run(conn, dag.run_ids["B"])
    finish_run(conn, dag.run_ids["C"])
    assert row(conn, dag.run_ids["C"])["status"] == "completed"
