"""Named queues against a real PostgreSQL: a claim takes only its queue's runs, a paused
queue gives nothing and loses nothing, and every door carries the queue a run waits in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from app.catalog import job_definitions, workflows
from app.catalog.job_fields import JobSpec
from app.core.errors import UsageError
from app.dags import workflow_shapes
from app.runs import queues, submission, transitions
from app.runs.run_inserts import COPY_THRESHOLD, NewRun, SubmitError
from app.services.trigger import Trigger
from tests.helpers.schedules import T0, add, settings

Conn = psycopg.Connection[Any]
LEASE = 30.0


def _queue_of(conn: Conn, run_id: int) -> str:
    row = conn.execute("SELECT queue FROM job_runs WHERE id = %s", (run_id,)).fetchone()
    assert row is not None
    return str(row["queue"])


def test_a_claim_takes_only_the_runs_of_its_queue(conn: Conn) -> None:
    reports = [submission.submit(conn, NewRun("noop", queue="reports")).id for _ in range(3)]
    plain = [submission.submit(conn, NewRun("noop")).id for _ in range(2)]

    taken = transitions.claim(conn, "w-reports", 10, LEASE, queue="reports")
    assert sorted(r.run_id for r in taken) == sorted(reports)
    taken = transitions.claim(conn, "w-default", 10, LEASE)
    assert sorted(r.run_id for r in taken) == sorted(plain)
    assert transitions.claim(conn, "w-other", 10, LEASE, queue="nightly") == []


def test_priorities_hold_within_a_queue(conn: Conn) -> None:
    low = submission.submit(conn, NewRun("noop", priority=1, queue="q")).id
    high = submission.submit(conn, NewRun("noop", priority=9, queue="q")).id
    submission.submit(conn, NewRun("noop", priority=99))  # another queue's
    (first,) = transitions.claim(conn, "w", 1, LEASE, queue="q")
    assert first.run_id == high
    (second,) = transitions.claim(conn, "w", 1, LEASE, queue="q")
    assert second.run_id == low


def test_a_paused_queue_starts_nothing_and_loses_nothing(conn: Conn) -> None:
    ids = [submission.submit(conn, NewRun("noop", queue="reports")).id for _ in range(4)]
    other = submission.submit(conn, NewRun("noop")).id
    queues.pause(conn, "reports", actor="alice", note="warehouse migration")

    assert transitions.claim(conn, "w", 10, LEASE, queue="reports") == []
    assert [r.run_id for r in transitions.claim(conn, "w", 10, LEASE)] == [other]
    (row,) = [q for q in queues.overview(conn) if q.name == "reports"]
    assert (row.paused, row.paused_by, row.paused_note) == (True, "alice", "warehouse migration")
    assert (row.pending, row.due, row.running) == (4, 4, 0)

    queues.resume(conn, "reports", actor="bob")
    taken = transitions.claim(conn, "w", 10, LEASE, queue="reports")
    assert sorted(r.run_id for r in taken) == sorted(ids)
    actions = [
        (r["actor"], r["action"])
        for r in conn.execute("SELECT actor, action FROM audit_log WHERE target_type = 'queue'")
    ]
    assert actions == [("alice", "queue.pause"), ("bob", "queue.resume")]


def test_resuming_a_queue_not_paused_is_refused_with_a_sentence(conn: Conn) -> None:
    with pytest.raises(queues.QueueError, match="not paused") as caught:
        queues.resume(conn, "reports", actor="bob")
    assert caught.value.field == "queue"
    for bad in ("", " ", "a\x00b", "x" * 201):
        with pytest.raises(UsageError) as refused:
            queues.pause(conn, bad, actor="alice")
        assert refused.value.field == "queue"
    assert conn.execute("SELECT count(*) AS n FROM queues").fetchone() == {"n": 0}


def test_a_dag_step_released_in_another_queue_waits_for_its_own_workers(conn: Conn) -> None:
    from app.dags import dag_submission

    dag = dag_submission.submit_dag(
        conn,
        {"first": NewRun("noop"), "second": NewRun("noop", queue="reports")},
        [("first", "second")],
    )
    (first,) = transitions.claim(conn, "w", 10, LEASE)
    outcome = transitions.Finish(first.run_id, first.attempt, _completed())
    claim = transitions.DownstreamClaim(10, LEASE)  # a default-queue worker's finish
    transitions.finish_many(conn, "w", [outcome], claim_downstream=claim)
    assert claim.jobs == []
    (second,) = transitions.claim(conn, "w-reports", 10, LEASE, queue="reports")
    assert second.run_id == dag.run_ids["second"]


def _completed() -> Any:
    from app.handlers.jobs import Outcome, OutcomeStatus

    return Outcome(OutcomeStatus.COMPLETED)


def test_every_submit_path_keeps_the_queue(conn: Conn) -> None:
    one = submission.submit(conn, NewRun("noop", queue="one")).id
    many = submission.submit_many(conn, [NewRun("noop", queue="many")] * 3)
    copied = submission.submit_many(conn, [NewRun("noop", queue="copied")] * COPY_THRESHOLD)
    assert _queue_of(conn, one) == "one"
    assert {_queue_of(conn, s.id) for s in many} == {"many"}
    assert {_queue_of(conn, copied[0].id), _queue_of(conn, copied[-1].id)} == {"copied"}
    with pytest.raises(SubmitError) as refused:
        submission.submit(conn, NewRun("noop", queue=""))
    assert refused.value.field == "queue"


def test_a_job_definitions_queue_goes_to_its_scheduled_and_workflow_runs(conn: Conn) -> None:
    job_definitions.create(
        conn, JobSpec(name="report", handler="noop", queue="reports"), actor="alice"
    )
    schedule_id = add(conn, "hourly report", every_seconds=60, job="report", handler=None)
    Trigger(settings()).run_once(conn, now=T0 + timedelta(minutes=2))
    rows = conn.execute("SELECT queue FROM job_runs WHERE schedule_id = %s", (schedule_id,))
    assert {r["queue"] for r in rows} == {"reports"}

    steps = {"make": workflow_shapes.Step("report")}
    workflows.define(conn, workflows.WorkflowSpec("wf", steps, []), actor="alice")
    (workflow_id,) = conn.execute("SELECT id FROM workflows WHERE name = 'wf'").fetchone().values()
    (shape,) = workflow_shapes.shapes(conn, [workflow_id]).values()
    assert shape.runs["make"].queue == "reports"


def test_runs_ended_per_minute_count_each_run_in_the_minute_it_ended(conn: Conn) -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    minutes = queues.THROUGHPUT_MINUTES
    # (queue, age of its end, how it ended): whole-minute ages sit on a minute's boundary
    ended = [
        ("q", timedelta(seconds=0), "completed"),
        ("q", timedelta(seconds=59.999999), "failed"),
        ("q", timedelta(minutes=1), "completed"),
        ("q", timedelta(minutes=1, seconds=30), "timed_out"),
        ("q", timedelta(minutes=minutes - 1, seconds=59), "cancelled"),
        ("q", timedelta(minutes=minutes), "completed"),  # just out of the window
        ("q", timedelta(minutes=minutes + 5), "skipped"),
        ("q", timedelta(seconds=-30), "completed"),  # after `now`: not yet in any minute
        ("reports", timedelta(minutes=7, seconds=1), "completed"),
        ("reports", timedelta(minutes=7, seconds=59), "completed"),
    ]
    for queue, age, status in ended:
        run_id = submission.submit(conn, NewRun("noop", queue=queue)).id
        conn.execute(
            "UPDATE job_runs SET status = %s, finished_at = %s WHERE id = %s",
            (status, now - age, run_id),
        )
    expected: dict[str, list[int]] = {"q": [0] * minutes, "reports": [0] * minutes}
    for queue, age, _ in ended:
        if timedelta(0) <= age < timedelta(minutes=minutes):
            # minute i covers ends in (now - (minutes - i) min, now - (minutes - i - 1) min]
            oldest_first = minutes - 1 - int(age / timedelta(minutes=1))
            expected[queue][oldest_first] += 1
    rows = {q.name: q for q in queues.overview(conn, now=now)}
    assert rows["q"].ended_per_minute == expected["q"]
    assert rows["reports"].ended_per_minute == expected["reports"]
    assert rows["default"].ended_per_minute == [0] * minutes
