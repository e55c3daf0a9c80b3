"""Version history follows the thing, not its name: a job renamed keeps its versions under
its new name, a new job under the old name starts its own history, and a schedule or
workflow deleted and created again under the same name starts afresh."""

from __future__ import annotations

from typing import Any

import psycopg

from app.catalog import job_definitions, workflows
from app.catalog.job_definitions import JobSpec
from app.catalog.workflows import WorkflowSpec
from app.dags.workflow_shapes import Step
from app.people import versions
from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleSpec

Conn = psycopg.Connection[dict[str, Any]]


def history(conn: Conn, kind: str, name: str) -> list[tuple[str, dict[str, Any]]]:
    """(action, snapshot) of each version, oldest first."""
    return [(v.action, v.snapshot) for v in reversed(versions.history(conn, kind, name))]


def job_id(conn: Conn, name: str) -> Any:
    return job_definitions.get(conn, name)["id"]


def test_a_renamed_job_keeps_its_history_and_a_new_job_under_the_old_name_starts_its_own(
    conn: Conn,
) -> None:
    job_definitions.create(conn, JobSpec(name="A", handler="noop", args={"v": 1}), actor="alice")
    job_definitions.update(
        conn, "A", JobSpec(name="A", handler="noop", args={"v": 2}), actor="alice"
    )
    renamed = job_id(conn, "A")
    job_definitions.update(conn, "A", JobSpec(name="B", handler="noop", args={"v": 2}), actor="bob")
    job_definitions.create(
        conn, JobSpec(name="A", handler="noop", args={"new": True}), actor="carol"
    )

    old = history(conn, "job", "B")
    assert [(action, snapshot["name"], snapshot["args"]) for action, snapshot in old] == [
        ("job.create", "A", {"v": 1}),
        ("job.update", "A", {"v": 2}),
        ("job.update", "B", {"v": 2}),
    ]
    new = history(conn, "job", "A")
    assert [(action, snapshot["args"]) for action, snapshot in new] == [
        ("job.create", {"new": True})
    ]

    # Rolling B back to its first version restores its args under its new name.
    first = versions.history(conn, "job", "B")[-1]
    versions.rollback(conn, "job", "B", first.id, actor="alice")
    row = job_definitions.get(conn, "B")
    assert (row["id"], row["args"]) == (renamed, {"v": 1})
    assert job_definitions.get(conn, "A")["args"] == {"new": True}
    assert len(history(conn, "job", "B")) == 4 and len(history(conn, "job", "A")) == 1


def test_a_version_of_another_job_is_not_one_to_roll_back_to(conn: Conn) -> None:
    job_definitions.create(conn, JobSpec(name="A", handler="noop", args={"v": 1}), actor="alice")
    job_definitions.update(
        conn, "A", JobSpec(name="B", handler="noop", args={"v": 1}), actor="alice"
    )
    job_definitions.create(conn, JobSpec(name="A", handler="noop", args={"v": 9}), actor="alice")
    of_b = versions.history(conn, "job", "B")[-1]
    try:
        versions.rollback(conn, "job", "A", of_b.id, actor="alice")
    except versions.VersionError as exc:
        assert "has no version" in str(exc)
    else:
        raise AssertionError("a version of B was applied to A")


def test_a_schedule_deleted_and_created_again_starts_a_new_history(conn: Conn) -> None:
    job_definitions.create(conn, JobSpec(name="report", handler="noop"), actor="alice")
    schedules.create_schedule(conn, ScheduleSpec(name="nightly", cron="30 2 * * *", job="report"))
    schedules.update_schedule(conn, "nightly", {"cron": "0 4 * * *"})
    schedules.delete(conn, "nightly")
    schedules.create_schedule(conn, ScheduleSpec(name="nightly", cron="0 5 * * *", job="report"))
    assert [(a, s["cron"]) for a, s in history(conn, "schedule", "nightly")] == [
        ("schedule.create", "0 5 * * *")
    ]


def test_a_workflow_deleted_and_created_again_starts_a_new_history(conn: Conn) -> None:
    job_definitions.create(conn, JobSpec(name="extract", handler="noop"), actor="alice")
    spec = WorkflowSpec("etl", {"a": Step("extract", {})}, [])
    workflows.define(conn, spec, actor="alice")
    workflows.define(conn, spec, actor="alice", replace=True)
    workflows.delete(conn, "etl", actor="alice")
    workflows.define(conn, WorkflowSpec("etl", {"b": Step("extract", {})}, []), actor="alice")
    assert [(a, list(s["steps"])) for a, s in history(conn, "workflow", "etl")] == [
        ("workflow.create", ["b"])
    ]


def test_a_job_renamed_to_the_name_of_a_deleted_one_does_not_inherit_its_versions(
    conn: Conn,
) -> None:
    job_definitions.create(
        conn, JobSpec(name="B", handler="noop", args={"old": True}), actor="alice"
    )
    job_definitions.delete(conn, "B", actor="alice")
    job_definitions.create(conn, JobSpec(name="A", handler="noop", args={"v": 1}), actor="alice")
    job_definitions.update(
        conn, "A", JobSpec(name="B", handler="noop", args={"v": 1}), actor="alice"
    )
    assert [(a, s["name"], s["args"]) for a, s in history(conn, "job", "B")] == [
        ("job.create", "A", {"v": 1}),
        ("job.update", "B", {"v": 1}),
    ]
