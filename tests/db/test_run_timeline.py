"""A run's event timeline (app.runs.run_timeline), built from the records Sundial keeps,
for runs moved through the real transitions and the real audited actions of people: each
event's kind, actor and words, in order; and nothing claimed that the records cannot say."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.people.audit import cli_actor
from app.runs import run_actions, run_timeline, submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.run_timeline import RunEvent
from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleSpec
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]
LATER = timedelta(minutes=10)  # past any lease the tests take


def _claim(conn: Conn, worker: str, run_id: int) -> int:
    (job,) = transitions.claim(conn, worker, 1, 30)
    assert job.run_id == run_id
    return job.attempt


def _finish(conn: Conn, worker: str, run_id: int, attempt: int, outcome: Outcome) -> None:
    won = transitions.finish_many(conn, worker, [transitions.Finish(run_id, attempt, outcome)])
    assert [f.run_id for f in won] == [run_id]


def _told(events: list[RunEvent]) -> list[tuple[str, str, str | None, str]]:
    return [(e.kind, e.actor.kind, e.actor.name, e.summary) for e in events]


def test_a_run_failed_retried_cancelled_by_people_and_completed_tells_each_step(
    conn: Conn,
) -> None:
    run_id = submission.submit(conn, NewRun("report", max_retries=3)).id
    attempt = _claim(conn, "w-1", run_id)
    _finish(conn, "w-1", run_id, attempt, Outcome(OutcomeStatus.FAILED, error="ValueError: boom"))
    retry_at = conn.execute("SELECT run_at FROM job_runs WHERE id = %s", [run_id]).fetchone()
    assert retry_at is not None

    # the retry waits: what the records say now
    waiting = run_timeline.events_of_run(conn, run_id)
    assert waiting is not None
    assert waiting[-1].kind == "retry_scheduled" and waiting[-1].until == retry_at["run_at"]
    assert waiting[-1].detail == "ValueError: boom" and waiting[-1].attempt == 1

    run_actions.cancel(conn, run_id, actor="alice")  # the pending retry: cancelled at once
    run_actions.retry(conn, run_id, actor="alice")
    attempt = _claim(conn, "w-2", run_id)
    run_actions.cancel(conn, run_id, actor="bob (api token 7)")  # running: asked to stop
    _finish(conn, "w-2", run_id, attempt, Outcome(OutcomeStatus.CANCELLED, error="cancelled"))
    run_actions.retry(conn, run_id, actor=cli_actor())
    attempt = _claim(conn, "w-1", run_id)
    _finish(conn, "w-1", run_id, attempt, Outcome.completed({"rows": 3}))

    events = run_timeline.events_of_run(conn, run_id)
    assert events is not None
    user = cli_actor().removeprefix("cli:")
    assert _told(events) == [
        ("submitted", "unknown", None, "Submitted"),
        ("started", "worker", "w-1", "Attempt 1 started"),
        ("retry_scheduled", "worker", "w-1", "Attempt 1 failed; it will be tried again"),
        ("cancelled", "person", "alice", "Cancelled"),
        ("retried", "person", "alice", "Retried, with a fresh retry budget"),
        ("started", "worker", "w-2", "Attempt 2 started"),
        ("cancel_requested", "api", "bob",
         "Asked to stop: its worker stops it at its next heartbeat"),
        ("cancelled", "worker", "w-2", "Cancelled: its worker stopped it, as was asked"),
        ("retried", "cli", user, "Retried, with a fresh retry budget"),
        ("started", "worker", "w-1", "Attempt 3 started"),
        ("completed", "worker", "w-1", "Completed"),
    ]  # fmt: skip
    assert events[0].detail == (
        "Who submitted it is not recorded (the API, the command line or a program)."
    )
    assert events[3].detail == "It was waiting to run."
    assert events[4].detail == "It had been cancelled."
    assert events[6].actor.words == "bob with API token 7"
    assert events[8].actor.words == f"{user} on the command line"
    assert [e.attempt for e in events if e.kind == "started"] == [1, 2, 3]
    times = [e.at for e in events]
    assert None not in times and times == sorted(times)  # type: ignore[type-var]
    assert run_timeline.events_of_run(conn, run_id + 1) is None


def test_a_dead_letter_retried_by_a_person_and_a_lost_lease_reaped(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("report", max_retries=0)).id
    attempt = _claim(conn, "w-1", run_id)
    _finish(conn, "w-1", run_id, attempt, Outcome(OutcomeStatus.TIMED_OUT, error="took 30 s"))
    run_actions.retry(conn, run_id, actor="carol")
    _claim(conn, "w-9", run_id)
    (reaped,) = transitions.reap(conn, now=db_now(conn) + LATER)  # w-9 died under it
    assert reaped.status == "pending"

    events = run_timeline.events_of_run(conn, run_id, now=db_now(conn) + LATER)
    assert events is not None
    assert _told(events) == [
        ("submitted", "unknown", None, "Submitted"),
        ("started", "worker", "w-1", "Attempt 1 started"),
        ("timed_out", "worker", "w-1", "Timed out for good: a dead letter, not tried again"),
        ("retried", "person", "carol", "Retried, with a fresh retry budget"),
        ("started", "worker", "w-9", "Attempt 2 started"),
        ("lease_expired", "reaper", None,
         "Its worker stopped answering (lease expired): back in the queue"),
    ]  # fmt: skip
    assert events[2].detail == "took 30 s" and events[3].detail == "It had timed out."
    assert "worker w-9 stopped heartbeating during attempt 2" in (events[-1].detail or "")


def test_a_delayed_run_that_expired_says_its_deadline_and_the_reaper(conn: Conn) -> None:
    now = db_now(conn)
    run = NewRun("report", delay=60, deadline=now + timedelta(seconds=90))
    run_id = submission.submit(conn, run).id
    before = run_timeline.events_of_run(conn, run_id)
    assert before is not None
    assert _told(before) == [("submitted", "unknown", None, "Submitted")]
    assert before[0].until is not None and before[0].until > now  # due later: no `due` yet

    expired = transitions.expire(conn, now=now + timedelta(seconds=120))
    assert expired == [run_id]
    events = run_timeline.events_of_run(conn, run_id, now=now + timedelta(seconds=120))
    assert events is not None
    assert _told(events) == [
        ("submitted", "unknown", None, "Submitted"),
        ("due", "system", None, "Due: its delay is over, it waits for a worker"),
        ("skipped", "reaper", None, "Skipped: it had not started by its deadline"),
    ]
    assert events[-1].until == now + timedelta(seconds=90)


def test_a_schedules_fire_and_its_run_now_name_the_schedule_and_the_person(conn: Conn) -> None:
    schedules.create_schedule(
        conn, ScheduleSpec(name="nightly", cron="0 3 * * *", handler="report"), actor="dana"
    )
    started = schedules.run_now(conn, "nightly", actor="dana")
    assert started.run_id is not None
    events = run_timeline.events_of_run(conn, started.run_id)
    assert events is not None
    assert _told(events)[0] == (
        "submitted",
        "person",
        "dana",
        "Started by hand from schedule nightly (run now)",
    )


def test_dag_steps_are_released_by_their_upstream_or_skipped_when_it_fails(conn: Conn) -> None:
    dag = dag_submission.submit_dag(
        conn,
        {"extract": NewRun("report", max_retries=0), "load": NewRun("report"),
         "audit": NewRun("report")},
        [("extract", "load")],
        name="nightly-etl",
    )  # fmt: skip
    audit_step = dag.run_ids["audit"]
    extract, load = dag.run_ids["extract"], dag.run_ids["load"]
    attempt = _claim(conn, "w-1", extract)
    _finish(conn, "w-1", extract, attempt, Outcome.completed())
    events = run_timeline.events_of_run(conn, load)
    assert events is not None
    assert _told(events) == [
        ("submitted", "unknown", None, "Submitted as step load of DAG run nightly-etl"),
        ("released", "dag", "extract", "Released: its upstream steps completed"),
    ]
    assert events[0].detail is not None and events[0].detail.endswith(
        "It waits for 1 upstream step."
    )

    dag = dag_submission.submit_dag(
        conn, {"a": NewRun("report", max_retries=0), "b": NewRun("report")}, [("a", "b")]
    )
    a, b = dag.run_ids["a"], dag.run_ids["b"]
    for other in (load, audit_step):  # out of the way, as a DAG cancel does: unaudited
        transitions.cancel(conn, other)
    attempt = _claim(conn, "w-1", a)
    _finish(conn, "w-1", a, attempt, Outcome(OutcomeStatus.FAILED, error="no file"))
    skipped = run_timeline.events_of_run(conn, b)
    assert skipped is not None
    assert _told(skipped)[-1] == (
        "skipped",
        "dag",
        None,
        "Skipped: an upstream step did not complete",
    )
    cancelled = run_timeline.events_of_run(conn, audit_step)
    assert cancelled is not None
    assert _told(cancelled)[-1] == ("cancelled", "unknown", None, "Cancelled")
    assert _told(run_timeline.events_of_run(conn, a) or [])[-1] == (
        "failed",
        "worker",
        "w-1",
        "Failed for good: a dead letter, not tried again",
    )
