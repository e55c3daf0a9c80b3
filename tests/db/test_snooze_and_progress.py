"""From inside a job, against a real PostgreSQL: a snooze puts the run back for later without
spending an attempt (fenced like any finish; a cancel wins), and progress reports reach the
run while it runs, in-process and from child processes, through real workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.core import limits
from app.handlers.jobs import Outcome, Snooze
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.api_client import api_as
from tests.helpers.processes import query, run_row, services, wait_until
from tests.helpers.workers import attempt_outcomes, submit, wait_status

Conn = psycopg.Connection[Any]
LEASE = 30.0


def _snooze(seconds: float, reason: str) -> Outcome:
    return Outcome.snoozed(Snooze(seconds, reason))


def _claimed(conn: Conn, now: datetime, worker: str = "w") -> tuple[int, int]:
    (job,) = transitions.claim(conn, worker, 1, LEASE, now=now)
    return job.run_id, job.attempt


def _row(conn: Conn, run_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM job_runs WHERE id = %s", (run_id,)).fetchone()
    assert row is not None
    return dict(row)


def _history(conn: Conn, run_id: int) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT attempt, outcome, error, requeued, worker FROM job_run_attempts"
        " WHERE run_id = %s ORDER BY attempt",
        (run_id,),
    ).fetchall()


# ---- the transition ------------------------------------------------------------------------


def test_a_snooze_puts_the_run_back_for_later_without_spending_an_attempt(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop", max_retries=0)).id
    now = datetime.now(UTC) + timedelta(seconds=1)
    _, attempt = _claimed(conn, now)
    finish = Finish(run_id, attempt, _snooze(600, "the export is not ready yet"))
    assert transitions.finish_many(conn, "w", [finish], now=now) == [finish]

    row = _row(conn, run_id)
    due = now + timedelta(seconds=600)
    assert (row["status"], row["run_at"], row["snoozed_until"]) == ("pending", due, due)
    assert (row["snooze_reason"], row["snooze_count"]) == ("the export is not ready yet", 1)
    assert row["attempt"] - row["retry_base"] == 0  # no attempt spent: max_retries 0 still runs
    assert row["lease_owner"] is None and row["finished_at"] is None
    assert _history(conn, run_id) == [
        {"attempt": 1, "outcome": "snoozed", "error": "the export is not ready yet",
         "requeued": True, "worker": "w"}
    ]  # fmt: skip

    assert transitions.claim(conn, "w", 1, LEASE, now=due - timedelta(seconds=1)) == []
    _, again = _claimed(conn, due)
    assert again == 2
    row = _row(conn, run_id)
    # the snooze is over: the count stays, its reason and time are cleared
    assert (row["snooze_reason"], row["snoozed_until"], row["snooze_count"]) == (None, None, 1)
    done = Finish(run_id, again, Outcome.completed("ok"))
    assert transitions.finish_many(conn, "w", [done], now=due) == [done]
    assert _row(conn, run_id)["status"] == "completed"


def test_a_cancel_requested_while_it_ran_beats_its_snooze(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    now = datetime.now(UTC) + timedelta(seconds=1)
    _, attempt = _claimed(conn, now)
    assert transitions.cancel(conn, run_id, now=now) == "running"  # asked to stop
    finish = Finish(run_id, attempt, _snooze(60, "later"))
    assert transitions.finish_many(conn, "w", [finish], now=now) == [finish]
    row = _row(conn, run_id)
    assert (row["status"], row["finished_at"], row["snoozed_until"]) == ("cancelled", now, None)
    assert _history(conn, run_id)[0]["requeued"] is False


def test_an_attempt_that_lost_its_lease_cannot_snooze(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    now = datetime.now(UTC) + timedelta(seconds=1)
    _, attempt = _claimed(conn, now, "w1")
    later = now + timedelta(seconds=LEASE + 1)
    (reaped,) = transitions.reap(conn, now=later)  # w1 stopped heartbeating
    assert reaped.status == "pending"
    late = Finish(run_id, attempt, _snooze(60, "too late"))
    assert transitions.finish_many(conn, "w1", [late], now=later) == []
    _, newer = _claimed(conn, later, "w2")
    assert transitions.finish_many(conn, "w1", [late], now=later) == []  # an older attempt
    # the same attempt, from a worker that does not hold its lease
    assert transitions.finish_many(conn, "w1", [Finish(run_id, newer, late.outcome)]) == []
    row = _row(conn, run_id)
    assert (row["status"], row["lease_owner"], row["snooze_count"]) == ("running", "w2", 0)
    assert "snoozed" not in [h["outcome"] for h in _history(conn, run_id)]


def test_a_run_that_snoozes_too_often_fails_with_the_reason(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    most = limits.MAX_SNOOZES
    conn.execute("UPDATE job_runs SET snooze_count = %s WHERE id = %s", (most, run_id))
    now = datetime.now(UTC) + timedelta(seconds=1)
    _, attempt = _claimed(conn, now)
    finish = Finish(run_id, attempt, _snooze(60, "still waiting"))
    assert transitions.finish_many(conn, "w", [finish], now=now) == [finish]
    row = _row(conn, run_id)
    assert (row["status"], row["snooze_count"]) == ("failed", limits.MAX_SNOOZES + 1)
    assert row["last_error"] == (
        f"snoozed {limits.MAX_SNOOZES + 1} times, more than the {limits.MAX_SNOOZES} allowed;"
        " last reason: still waiting"
    )


def test_a_run_snoozed_past_its_deadline_is_expired_by_the_reaper(conn: Conn) -> None:
    now = datetime.now(UTC) + timedelta(seconds=1)
    run_id = submission.submit(conn, NewRun("noop", deadline=now + timedelta(seconds=30))).id
    _, attempt = _claimed(conn, now)
    transitions.finish_many(conn, "w", [Finish(run_id, attempt, _snooze(60, "later"))], now=now)
    after = now + timedelta(seconds=61)
    assert transitions.claim(conn, "w", 1, LEASE, now=after) == []
    assert transitions.expire(conn, now=after) == [run_id]
    assert _row(conn, run_id)["skip_reason"] == "expired"


def test_progress_is_written_only_by_the_attempt_holding_the_run(conn: Conn) -> None:
    first = submission.submit(conn, NewRun("noop")).id
    second = submission.submit(conn, NewRun("noop")).id
    now = datetime.now(UTC) + timedelta(seconds=1)
    jobs = transitions.claim(conn, "w", 2, LEASE, now=now)
    assert {j.run_id for j in jobs} == {first, second}
    reports = {(first, 1): (40.0, "40 of 100"), (second, 7): (1.0, None)}  # 7: not its attempt
    assert transitions.report_progress(conn, "w", reports, now=now) == {(first, 1)}
    assert transitions.report_progress(conn, "other", {(second, 1): (1.0, None)}) == set()
    row = _row(conn, first)
    assert (row["progress"], row["progress_message"], row["progress_at"]) == (40, "40 of 100", now)
    assert _row(conn, second)["progress"] is None

    # kept once the attempt ends; cleared when the next one starts
    transitions.finish_many(conn, "w", [Finish(first, 1, _snooze(1, "again"))], now=now)
    assert transitions.report_progress(conn, "w", {(first, 1): (50.0, None)}) == set()
    assert _row(conn, first)["progress"] == 40
    (job,) = transitions.claim(conn, "w", 1, LEASE, now=now + timedelta(seconds=2))
    assert job.run_id == first
    row = _row(conn, first)
    assert (row["progress"], row["progress_message"], row["progress_at"]) == (None, None, None)


def test_the_database_refuses_progress_that_is_not_finite(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    for value in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE job_runs SET progress = %s::float8 WHERE id = %s", (value, run_id))


# ---- real workers --------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["thread", "process"])
def test_a_snoozing_handler_comes_back_after_its_delay_with_its_attempt_unspent(
    db_url: str, tmp_path: Path, model: str
) -> None:
    args = {"seconds": 1.5, "reason": "waiting for the partner's file"}
    (run_id,) = submit(db_url, NewRun("snooze_first", args, execution_model=model, max_retries=0))
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: run_row(db_url, run_id)["snooze_count"] == 1, "snoozed", 30, worker)
        snoozed = run_row(db_url, run_id)
        if snoozed["status"] == "pending":  # seen while it waits: the reason is on the run
            assert snoozed["snooze_reason"] == "waiting for the partner's file"
            assert snoozed["snoozed_until"] is not None
        row = wait_status(db_url, run_id, "completed", service=worker)
    assert row["result"] == {"attempt": 2}  # max_retries 0, yet a second attempt ran
    assert (row["snooze_count"], row["attempt"] - row["retry_base"]) == (1, 1)
    assert attempt_outcomes(db_url, run_id) == ["snoozed", "completed"]
    (first,) = query(db_url, "SELECT error, finished_at FROM job_run_attempts "
                     "WHERE run_id = %s AND attempt = 1", run_id)  # fmt: skip
    assert first["error"] == "waiting for the partner's file"
    assert (row["started_at"] - first["finished_at"]).total_seconds() >= 1.5


@pytest.mark.parametrize("model", ["thread", "process", "subprocess"])
def test_progress_reported_by_a_running_job_shows_on_the_run_while_it_runs(
    db_url: str, tmp_path: Path, model: str
) -> None:
    go_on = tmp_path / "go-on"
    (run_id,) = submit(
        db_url, NewRun("report_progress", {"go_on": str(go_on)}, execution_model=model)
    )
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: run_row(db_url, run_id)["progress"] == 50, "progress 50", 30, worker)
        row = run_row(db_url, run_id)
        assert (row["status"], row["progress_message"]) == ("running", "step 200 of 200")
        with api_as(db_url, "viewer") as api:
            read = api.get(f"/api/v1/runs/{run_id}").json()
        assert (read["progress"], read["progress_message"]) == (50, "step 200 of 200")
        assert read["progress_at"] is not None
        go_on.touch()
        row = wait_status(db_url, run_id, "completed", service=worker)
    # the last report lands before the finish, and stays on the completed run
    assert (row["progress"], row["progress_message"]) == (100, "done")
