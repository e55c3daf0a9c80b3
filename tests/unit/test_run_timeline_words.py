"""The run timeline's pure part: how the audit log's actors read, and what the records of
a run mean where no test database is needed (a snooze waiting, a cancel nobody audited,
a quarantine by the reaper)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.runs import breakers, run_timeline
from app.runs.run_timeline import actor_of, assemble
from app.scheduling import schedules

T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _run(**fields: Any) -> dict[str, Any]:
    base = {
        "id": 1, "status": "pending", "attempt": 0, "created_at": T0, "run_at": T0,
        "started_at": None, "finished_at": None, "deadline": None, "lease_owner": None,
        "cancel_requested": False, "quarantined": False, "skip_reason": None,
        "last_error": None, "schedule_id": None, "fire_time": None, "dag_run_id": None,
        "dag_node": None, "schedule_name": None, "manual_fire": None, "dag_name": None,
        "workflow_id": None, "workflow_name": None, "dag_schedule_id": None,
        "dag_schedule_name": None, "started_by": None, "read_at": _at(3600),
    }  # fmt: skip
    return {**base, **fields}


def _attempt(n: int, outcome: str, start: float, end: float, **fields: Any) -> dict[str, Any]:
    return {"attempt": n, "worker": "w-1", "outcome": outcome, "started_at": _at(start),
            "finished_at": _at(end), "error": None, "requeued": None, **fields}  # fmt: skip


def test_the_audit_logs_actors_read_as_people_tokens_the_command_line_and_sundial() -> None:
    assert (actor_of("alice").kind, actor_of("alice").words) == ("person", "alice")
    api = actor_of("billing-bot (api token 12)")
    assert (api.kind, api.name, api.words) == ("api", "billing-bot",
                                               "billing-bot with API token 12")  # fmt: skip
    cli = actor_of("cli:ops")
    assert (cli.kind, cli.name, cli.words) == ("cli", "ops", "ops on the command line")
    assert actor_of("cli").words == "someone on the command line"
    assert actor_of("sundial").kind == actor_of("system").kind == "system"
    assert {breakers.SYSTEM_ACTOR, schedules.SYSTEM_ACTOR} == run_timeline.SYSTEM_ACTORS


def test_a_snoozed_run_waiting_says_until_when_and_why() -> None:
    run = _run(attempt=1, run_at=_at(600), started_at=_at(5))
    snoozed = _attempt(1, "snoozed", 5, 6, error="export not there yet", requeued=True)
    events = assemble(run, [snoozed], [])
    last = events[-1]
    assert (last.kind, last.summary, last.detail) == (
        "snoozed",
        "Snoozed by its job, no attempt used",
        "export not there yet",
    )
    assert last.until == _at(600)


def test_a_cancel_nobody_audited_is_told_without_a_time_or_a_name() -> None:
    run = _run(status="running", attempt=1, started_at=_at(5), lease_owner="w-2",
               cancel_requested=True)  # fmt: skip
    events = assemble(run, [], [])
    assert [(e.kind, e.actor.words) for e in events] == [
        ("submitted", "unknown"), ("started", "worker w-2"), ("cancel_requested", "unknown"),
    ]  # fmt: skip
    assert events[-1].at is None


def test_a_run_the_reaper_quarantined_and_a_dag_step_from_a_workflow_schedule() -> None:
    error = "quarantined after 6 crashes, each of them a worker death: worker w-1 stopped"
    run = _run(status="failed", attempt=1, started_at=_at(5), finished_at=_at(60),
               quarantined=True, last_error=error, dag_run_id="d", dag_node="load",
               workflow_id="w", workflow_name="etl", dag_schedule_id="s",
               dag_schedule_name="nightly")  # fmt: skip
    lost = _attempt(1, "lost", 5, 60, error=error, requeued=False)
    events = assemble(run, [lost], [])
    assert [(e.kind, e.actor.words, e.summary) for e in events] == [
        ("submitted", "schedule nightly", "Fired by schedule nightly as step load of workflow etl"),
        ("started", "worker w-1", "Attempt 1 started"),
        ("quarantined", "the reaper", "Quarantined: its workers died under it too often"),
    ]  # fmt: skip
