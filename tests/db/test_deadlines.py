"""Deadlines against a real PostgreSQL: a run not started by its deadline is never claimed
and ends skipped, as expired, at the reaper's next pass; every door sets one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from app.core.config import Settings
from app.runs import queues, submission, transitions
from app.runs.run_inserts import COPY_THRESHOLD, NewRun, SubmitError
from app.services.reaper import Reaper
from tests.helpers.api_client import api_as
from tests.helpers.commands import run_sundial

Conn = psycopg.Connection[Any]
LEASE = 30.0


def _row(conn: Conn, run_id: int) -> dict[str, Any]:
    row = conn.execute(
        "SELECT status, skip_reason, last_error, deadline, finished_at, attempt FROM job_runs"
        " WHERE id = %s",
        (run_id,),
    ).fetchone()
    assert row is not None
    return dict(row)


def test_a_run_past_its_deadline_is_never_claimed_and_ends_expired(conn: Conn) -> None:
    deadline = datetime.now(UTC) + timedelta(minutes=5)
    timely = submission.submit(conn, NewRun("noop", deadline=deadline)).id
    late = submission.submit(conn, NewRun("noop", deadline=deadline)).id
    plain = submission.submit(conn, NewRun("noop")).id

    (first,) = transitions.claim(conn, "w", 1, LEASE, now=deadline - timedelta(seconds=1))
    assert first.run_id == timely  # before its deadline, a run starts like any other
    after = deadline + timedelta(seconds=1)
    assert [r.run_id for r in transitions.claim(conn, "w", 10, LEASE, now=after)] == [plain]
    assert _row(conn, late)["status"] == "pending"  # until the reaper passes

    assert transitions.expire(conn, now=after) == [late]
    row = _row(conn, late)
    assert (row["status"], row["skip_reason"], row["attempt"]) == ("skipped", "expired", 0)
    assert row["finished_at"] == after
    assert row["last_error"] == (
        f"not run: not started by its deadline, {deadline:%Y-%m-%d %H:%M:%S} UTC"
    )
    assert transitions.expire(conn, now=after) == []  # once
    assert _row(conn, timely)["status"] == "running"  # started in time: left alone


def test_the_reaper_expires_runs_in_batches(conn: Conn, monkeypatch: Any) -> None:
    import app.services.reaper as reaper_module

    monkeypatch.setattr(reaper_module, "REAP_BATCH", 3)
    deadline = datetime.now(UTC) + timedelta(minutes=1)
    ids = [r.id for r in submission.submit_many(conn, [NewRun("noop", deadline=deadline)] * 7)]
    report = Reaper(Settings.from_env({})).run_once(conn, now=deadline + timedelta(seconds=1))
    assert report.expired == 7
    assert {_row(conn, i)["status"] for i in ids} == {"skipped"}


def test_a_limited_queue_never_starts_a_run_past_its_deadline(conn: Conn) -> None:
    deadline = datetime.now(UTC) + timedelta(minutes=1)
    submission.submit(conn, NewRun("noop", queue="q", deadline=deadline))
    queues.set_limits(conn, "q", actor="a", max_running=5)
    assert transitions.claim(conn, "w", 5, LEASE, queue="q", now=deadline) == []


def test_every_submit_path_keeps_the_deadline(conn: Conn) -> None:
    deadline = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    one = submission.submit(conn, NewRun("noop", deadline=deadline)).id
    few = [r.id for r in submission.submit_many(conn, [NewRun("noop", deadline=deadline)] * 3)]
    many = submission.submit_many(
        conn, [NewRun("noop", deadline=deadline if i % 2 else None) for i in range(COPY_THRESHOLD)]
    )
    assert {_row(conn, i)["deadline"] for i in [one, *few]} == {deadline}
    assert [_row(conn, r.id)["deadline"] for r in many[:4]] == [None, deadline, None, deadline]


@pytest.mark.parametrize(
    ("run", "field", "message"),
    [
        (
            NewRun("noop", deadline=datetime(2030, 1, 1)),  # noqa: DTZ001  (no zone: refused)
            "deadline",
            "needs a time with a time zone",
        ),
        (
            NewRun(
                "noop",
                run_at=datetime(2030, 1, 2, tzinfo=UTC),
                deadline=datetime(2030, 1, 1, tzinfo=UTC),
            ),
            "deadline",
            "the deadline must come after the time to run at",
        ),
        (NewRun("noop", deadline=datetime(2300, 1, 1, tzinfo=UTC)), "deadline", "must lie between"),
    ],
)
def test_a_bad_deadline_is_refused_with_a_sentence(
    conn: Conn, run: NewRun, field: str, message: str
) -> None:
    with pytest.raises(SubmitError, match=message) as refused:
        submission.submit(conn, run)
    assert refused.value.field == field
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 0}


def test_the_api_and_the_cli_set_deadlines(db_url: str, conn: Conn) -> None:

    with api_as(db_url, "operator") as api:
        made = api.post(
            "/api/v1/runs", json={"handler": "noop", "deadline": "2031-01-02T03:04:05Z"}
        )
        assert made.status_code == 201, made.text
        assert made.json()["run"]["deadline"] == "2031-01-02T03:04:05Z"
        bad = api.post("/api/v1/runs", json={"handler": "noop", "deadline": "tomorrow"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "deadline"

    before = datetime.now(UTC)
    done = run_sundial(db_url, "submit", "noop", "--expire-after", "90")
    assert done.returncode == 0, done.stderr
    deadline = _row(conn, int(done.stdout.strip()))["deadline"]
    assert before + timedelta(seconds=89) < deadline < datetime.now(UTC) + timedelta(seconds=91)
    exact = run_sundial(db_url, "submit", "noop", "--deadline", "2031-01-02T03:04:05+01:00")
    assert _row(conn, int(exact.stdout.strip()))["deadline"] == datetime(
        2031, 1, 2, 2, 4, 5, tzinfo=UTC
    )
    for args, message in [
        (["--deadline", "soon"], "--deadline must be an ISO 8601 time"),
        (["--expire-after", "0"], "--expire-after must be between 1"),
        (["--deadline", "2031-01-02T03:04:05Z", "--expire-after", "5"], "not allowed with"),
    ]:
        refused = run_sundial(db_url, "submit", "noop", *args)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr


def test_a_schedules_fires_expire_when_not_started_in_time(conn: Conn) -> None:
    from app.services.trigger import Trigger
    from tests.helpers.schedules import T0, add, settings

    late = add(conn, "reminders", cron="* * * * *", expire_after_seconds=300)
    patient = add(conn, "reports", cron="* * * * *")
    fired_at = T0 + timedelta(seconds=31)  # 10:00:01, past the 10:00 fire
    Trigger(settings(), holder="t").run_once(conn, now=fired_at)
    rows = conn.execute(
        "SELECT schedule_id, run_at, deadline FROM job_runs ORDER BY schedule_id = %s",
        (late,),
    ).fetchall()
    deadlines = {r["schedule_id"]: (r["run_at"], r["deadline"]) for r in rows}
    run_at, deadline = deadlines[late]
    assert deadline == run_at + timedelta(seconds=300)
    assert deadlines[patient][1] is None

    assert transitions.claim(conn, "w", 10, LEASE, now=deadline)[0].fire_time is not None
    ids = transitions.expire(conn, now=deadline + timedelta(seconds=1))
    assert len(ids) <= 1  # the claim took one of the two; a run past its deadline waits no more


def test_the_expiry_of_a_schedule_is_set_changed_and_cleared_at_every_door(
    db_url: str, conn: Conn
) -> None:
    from tests.helpers.schedules import add

    add(conn, "reminders", cron="0 9 * * *", expire_after_seconds=600)

    def expiry() -> Any:
        row = conn.execute(
            "SELECT expire_after_seconds AS s FROM schedules WHERE name = 'reminders'"
        ).fetchone()
        return row["s"] if row else None

    assert expiry() == 600
    with api_as(db_url, "editor") as api:
        changed = api.patch("/api/v1/schedules/reminders", json={"expire_after_seconds": 120})
        assert changed.status_code == 200, changed.text
        assert changed.json()["schedule"]["expire_after_seconds"] == 120
        refused = api.patch("/api/v1/schedules/reminders", json={"expire_after_seconds": 0})
        assert refused.status_code == 422
    assert expiry() == 120
    done = run_sundial(db_url, "schedule", "update", "reminders", "--expire-after", "none")
    assert done.returncode == 0, done.stderr
    assert expiry() is None
    refused_cli = run_sundial(db_url, "schedule", "update", "reminders", "--expire-after", "soon")
    assert (
        refused_cli.returncode == 2 and "--expire-after takes a whole number" in refused_cli.stderr
    )


def test_a_workflows_schedule_cannot_set_an_expiry_and_says_why(conn: Conn) -> None:
    from app.catalog import workflows
    from app.catalog.workflows import WorkflowSpec
    from app.dags.workflow_shapes import Step
    from app.scheduling import schedules
    from app.scheduling.schedule_spec import ScheduleError, ScheduleSpec
    from tests.helpers.schedules import add

    add(conn, "cleanup", every_seconds=60)
    workflows.define(conn, WorkflowSpec("nightly", {"clean": Step("cleanup")}), actor="test")
    with pytest.raises(ScheduleError, match="deadlines apply to the runs of a job") as refused:
        spec = ScheduleSpec(name="nightly", cron="0 3 * * *", workflow="nightly",
                            expire_after_seconds=60)  # fmt: skip
        schedules.create_schedule(conn, spec)
    assert refused.value.field == "expire_after_seconds"
    schedules.create_schedule(conn, ScheduleSpec(name="nightly", cron="0 3 * * *",
                                                 workflow="nightly"))  # fmt: skip
    with pytest.raises(ScheduleError, match="cannot give its fires a time to start by"):
        schedules.update_schedule(conn, "nightly", {"expire_after_seconds": 60}, actor="test")
    row = conn.execute("SELECT expire_after_seconds FROM schedules WHERE name = 'nightly'")
    assert row.fetchone() == {"expire_after_seconds": None}
