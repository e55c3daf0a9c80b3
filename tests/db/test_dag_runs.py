"""DAG runs for the dashboard: recent ones with counted steps, and one DAG run's picture
with each step's status."""

from __future__ import annotations

from typing import Any

import psycopg

from app.dags import dag_runs, dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]


def test_a_dag_runs_picture_colours_each_step_by_its_status(conn: Conn) -> None:
    dag = dag_submission.submit_dag(
        conn,
        {
            "extract": NewRun("noop"),
            "load": NewRun("noop", max_retries=2),
            "report": NewRun("noop"),
        },
        [("extract", "load"), ("load", "report")],
        name="nightly",
    )
    (first,) = transitions.claim(conn, "w", 10, 30)
    transitions.finish_many(conn, "w", [Finish(first.run_id, first.attempt, Outcome.completed())])
    (second,) = transitions.claim(conn, "w", 10, 30)
    failure = Outcome(OutcomeStatus.FAILED, error="again", retryable=True)
    transitions.finish_many(conn, "w", [Finish(second.run_id, second.attempt, failure)])
    found = dag_runs.picture(conn, dag.id)
    assert found is not None and found.live
    assert found.status_of == {"extract": "completed", "load": "retrying", "report": "blocked"}
    assert found.link_of["load"] == f"/runs/{dag.run_ids['load']}"
    assert sorted((e.upstream, e.downstream) for e in found.picture.edges) == [
        ("extract", "load"), ("load", "report"),
    ]  # fmt: skip
    assert [n.layer for n in found.picture.nodes] == [0, 1, 2]
    (listed,) = dag_runs.recent(conn)
    assert (listed["name"], listed["total"], listed["completed"], listed["status"]) == (
        "nightly", 3, 1, "pending",
    )  # fmt: skip
    assert dag_runs.recent(conn, before=db_now(conn).replace(year=2000)) == []


def test_steps_joined_after_a_run_are_named_after_it(conn: Conn) -> None:
    upstream = submission.submit(conn, NewRun("noop")).id
    after = dag_submission.submit_after(conn, NewRun("noop"), [upstream])
    (dag_run_id,) = [r["dag_run_id"] for r in conn.execute(
        "SELECT DISTINCT dag_run_id FROM job_runs WHERE dag_run_id IS NOT NULL"
    ).fetchall()]  # fmt: skip
    found = dag_runs.picture(conn, dag_run_id)
    assert found is not None
    assert found.status_of == {f"run {upstream}": "pending", f"run {after}": "blocked"}


def test_overall_status_in_one_word() -> None:
    base = {"total": 3, "completed": 0, "failed": 0, "running": 0, "waiting": 0, "other": 0}
    assert dag_runs.overall_status({**base, "running": 1, "failed": 1}) == "running"
    assert dag_runs.overall_status({**base, "completed": 3}) == "completed"
    assert dag_runs.overall_status({**base, "completed": 1, "failed": 1, "other": 1}) == "failed"
    assert dag_runs.overall_status({**base, "completed": 2, "other": 1}) == "cancelled"
    assert dag_runs.overall_status({**base, "waiting": 3}) == "pending"
