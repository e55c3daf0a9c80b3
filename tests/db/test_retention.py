"""The reaper prunes history past its retention, and nothing else: runs that ended (dead
letters kept longer), whole DAG runs only once every step ended, the fire ledger, and the
sessions and sign-in links that expired without anyone signing out."""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.core.config import Settings
from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.people import users
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.scheduling import schedules
from app.scheduling.fire_decisions import FireOutcome
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import FireRecord, create_schedule
from app.services import reaper
from app.services.reaper import PrunedHistory, Reaper
from tests.helpers.processes import finish_run
from tests.helpers.waits import db_now, wait_until_blocked

Conn = psycopg.Connection[Any]
DAY = timedelta(days=1)
FAIL = Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)


def settings(**overrides: Any) -> Settings:
    return dataclasses.replace(Settings.from_env({}), **overrides)


def run_ids(conn: Conn) -> set[int]:
    return {r["id"] for r in conn.execute("SELECT id FROM job_runs").fetchall()}


def attempt_run_ids(conn: Conn) -> set[int]:
    return {r["run_id"] for r in conn.execute("SELECT run_id FROM job_run_attempts").fetchall()}


def test_ended_runs_go_after_their_retention_and_dead_letters_later(conn: Conn) -> None:
    done, failed, cancelled, waiting, running = (
        submission.submit(conn, NewRun("noop")).id for _ in range(5)
    )
    finish_run(conn, done, Outcome.completed())
    finish_run(conn, failed, FAIL)
    transitions.cancel(conn, cancelled)
    conn.execute("UPDATE job_runs SET priority = 100 WHERE id = %s", (running,))
    assert [j.run_id for j in transitions.claim(conn, "w", 1, 30)] == [running]
    now = db_now(conn)
    keeper = Reaper(settings())

    assert keeper.prune(conn, now + 13 * DAY) == PrunedHistory()
    assert keeper.prune(conn, now + 15 * DAY) == PrunedHistory(runs=2)
    assert run_ids(conn) == {failed, waiting, running}
    assert attempt_run_ids(conn) == {failed}
    assert keeper.prune(conn, now + 31 * DAY) == PrunedHistory(runs=1)
    assert run_ids(conn) == {waiting, running}  # never ended: never pruned
    assert attempt_run_ids(conn) == set()


def test_a_dag_run_goes_whole_once_every_step_ended(conn: Conn) -> None:
    nodes = {name: NewRun("noop") for name in "ABC"}
    dag = dag_submission.submit_dag(conn, nodes, [("A", "B"), ("B", "C")])
    finish_run(conn, dag.run_ids["A"], Outcome.completed())
    keeper = Reaper(settings())
    # A ended long ago in this future, but B and C still wait on it.
    assert keeper.prune(conn, db_now(conn) + 365 * DAY) == PrunedHistory()
    finish_run(conn, dag.run_ids["B"], Outcome.completed())
    finish_run(conn, dag.run_ids["C"], Outcome.completed())
    assert keeper.prune(conn, db_now(conn) + 15 * DAY) == PrunedHistory(runs=3, dag_runs=1)
    assert run_ids(conn) == set()
    for table in ("dag_runs", "job_run_deps", "job_run_attempts"):
        assert conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone() == {"n": 0}


def test_a_dag_run_with_a_failed_step_is_kept_as_long_as_dead_letters(conn: Conn) -> None:
    dag = dag_submission.submit_dag(conn, {"A": NewRun("noop"), "B": NewRun("noop")}, [("A", "B")])
    finish_run(conn, dag.run_ids["A"], FAIL)  # B is skipped
    keeper = Reaper(settings())
    assert keeper.prune(conn, db_now(conn) + 15 * DAY) == PrunedHistory()
    assert keeper.prune(conn, db_now(conn) + 31 * DAY) == PrunedHistory(runs=2, dag_runs=1)


def prune_in_thread(db_url: str, when: datetime) -> tuple[Conn, threading.Thread]:
    """A connection and a thread (started by the caller) that prunes on it as at `when`."""
    other = psycopg.connect(db_url, autocommit=True, row_factory=dict_row)
    return other, threading.Thread(target=Reaper(settings()).prune, args=(other, when))


def test_a_dag_run_pruned_while_a_step_is_retried_keeps_the_retried_step(
    db_url: str, conn: Conn
) -> None:
    """A dead letter of an old DAG run is retried while the reaper prunes that DAG run:
    the retry holds the step's row, so the prune cannot check the step as it will be once
    the retry commits. It must keep the DAG run and the retried step, not delete the run
    the retry just re-queued."""
    dag = dag_submission.submit_dag(
        conn, {"A": NewRun("noop", max_retries=0), "B": NewRun("noop")}, [("A", "B")]
    )
    finish_run(conn, dag.run_ids["A"], FAIL)  # B is skipped
    other, pruning = prune_in_thread(db_url, db_now(conn) + 365 * DAY)
    with other:
        with conn.transaction():
            assert transitions.retry(conn, dag.run_ids["A"]) is not None
            pruning.start()
            wait_until_blocked(conn, other.info.backend_pid, or_done=pruning)
        pruning.join(timeout=10)
    row = conn.execute("SELECT status FROM job_runs WHERE id = %s", (dag.run_ids["A"],)).fetchone()
    assert row == {"status": "pending"}
    assert run_ids(conn) == set(dag.run_ids.values())
    assert conn.execute("SELECT id FROM dag_runs").fetchall() == [{"id": dag.id}]


def test_a_dag_run_pruned_while_a_run_is_submitted_after_a_step_keeps_the_new_run(
    db_url: str, conn: Conn
) -> None:
    """A run is submitted to start after a step of an old DAG run (its transaction holds
    the step's row) while the reaper prunes that DAG run: the new run joins the DAG run and
    reads that step's result, so the DAG run must stay whole, not lose its other steps and
    its row under the new run."""
    dag = dag_submission.submit_dag(conn, {"A": NewRun("noop")}, [])
    finish_run(conn, dag.run_ids["A"], Outcome.completed({"rows": 3}))
    other, pruning = prune_in_thread(db_url, db_now(conn) + 365 * DAY)
    with other:
        with conn.transaction():
            after = dag_submission.submit_after(conn, NewRun("noop"), [dag.run_ids["A"]])
            pruning.start()
            wait_until_blocked(conn, other.info.backend_pid, or_done=pruning)
        pruning.join(timeout=10)
    assert run_ids(conn) == {dag.run_ids["A"], after}
    assert conn.execute("SELECT id FROM dag_runs").fetchall() == [{"id": dag.id}]
    (job,) = transitions.claim(conn, "w", 1, 30)
    assert (job.run_id, job.upstream_results) == (after, {"A": {"rows": 3}})


def test_a_retention_of_none_keeps_everything(conn: Conn) -> None:
    finish_run(conn, submission.submit(conn, NewRun("noop")).id, Outcome.completed())
    forever = settings(keep_runs_days=None, keep_failed_days=None, keep_fires_days=None)
    assert Reaper(forever).prune(conn, db_now(conn) + 3650 * DAY) == PrunedHistory()
    assert len(run_ids(conn)) == 1


def test_the_ledger_is_pruned_a_slice_of_schedules_at_a_time(
    conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = db_now(conn)
    ids = [
        create_schedule(conn, ScheduleSpec(name=f"s{i}", cron="0 * * * *", handler="noop")).id
        for i in range(3)
    ]
    old, recent = now - 100 * DAY, now - 10 * DAY
    records = [
        FireRecord(sid, at, at.replace(tzinfo=None), FireOutcome.ENQUEUED)
        for sid in ids
        for at in (old, recent)
    ]
    records.append(FireRecord(ids[0], old - DAY, old.replace(tzinfo=None), FireOutcome.QUEUED))
    schedules.record_fires(conn, records)
    monkeypatch.setattr(reaper, "FIRE_PRUNE_SLICE", 1)
    monkeypatch.setattr(reaper, "FIRE_PRUNE_SLICES", 2)
    keeper = Reaper(settings())
    assert keeper.prune(conn, now).fires == 2  # two schedules' slices this pass
    assert keeper.prune(conn, now).fires == 1  # the third, and the walk starts over
    left = conn.execute("SELECT fire_time, outcome FROM schedule_fires").fetchall()
    assert sorted((r["fire_time"], r["outcome"]) for r in left) == sorted(
        [(old - DAY, "queued")] + [(recent, "enqueued")] * 3
    )


def test_the_reaper_prunes_once_per_interval(conn: Conn) -> None:
    keeper = Reaper(settings())
    assert keeper.run_once(conn).pruned == PrunedHistory()
    assert keeper.run_once(conn).pruned is None


def test_the_prune_cadence_follows_the_clock_the_reaper_is_given(conn: Conn) -> None:
    keeper = Reaper(settings())
    start = db_now(conn)
    interval = timedelta(seconds=reaper.PRUNE_INTERVAL_SECONDS)
    assert keeper.run_once(conn, start).pruned == PrunedHistory()
    assert keeper.run_once(conn, start + interval - timedelta(seconds=1)).pruned is None
    assert keeper.run_once(conn, start + interval).pruned == PrunedHistory()
    assert keeper.run_once(conn, start + interval).pruned is None
    # A clock set back (a test moving time, the database's clock corrected) prunes again
    # rather than waiting for the old time to come round.
    assert keeper.run_once(conn, start).pruned == PrunedHistory()


def test_a_pass_prunes_batch_after_batch_up_to_its_bound(
    conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(7):
        finish_run(conn, submission.submit(conn, NewRun("noop")).id, Outcome.completed())
    monkeypatch.setattr(reaper, "PRUNE_BATCH", 2)
    monkeypatch.setattr(reaper, "PRUNE_BATCHES", 3)
    keeper = Reaper(settings())
    later = db_now(conn) + 15 * DAY
    assert keeper.prune(conn, later).runs == 6  # three full batches: the bound of a pass
    assert keeper.prune(conn, later).runs == 1
    assert run_ids(conn) == set()


# ---- sign-ins nobody ended ------------------------------------------------------------------

SECRET = "retention-test-secret"
HOUR = timedelta(hours=1)


def sign_in_counts(conn: Conn) -> tuple[int, int]:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM web_sessions) AS sessions,"
        " (SELECT count(*) FROM sign_in_links) AS links"
    ).fetchone()
    assert row is not None
    return row["sessions"], row["links"]


def test_expired_sessions_and_sign_in_links_go_without_anyone_signing_out(conn: Conn) -> None:
    alice = users.create_user(conn, "alice", "correct horse battery", "viewer", actor="test")
    now = db_now(conn)
    kept = users.start_session(conn, alice, SECRET, now=now)
    for hours in (0, 1, 2):  # three browsers closed without signing out
        users.start_session(conn, alice, SECRET, now=now - 24 * HOUR + hours * HOUR)
    # (Making a link drops the links expired by then: the older ones are made last.)
    fresh = users.create_sign_in_link(conn, alice, SECRET, now=now)
    used = users.create_sign_in_link(conn, alice, SECRET, now=now - HOUR)
    users.create_sign_in_link(conn, alice, SECRET, now=now - HOUR)  # never used
    assert users.use_sign_in_link(conn, used, SECRET, now=now - HOUR) == alice
    assert sign_in_counts(conn) == (4, 2)
    keeper = Reaper(settings())

    assert keeper.prune(conn, now) == PrunedHistory(sessions=3, sign_in_links=1)
    assert sign_in_counts(conn) == (1, 1)
    assert users.session_user(conn, kept, SECRET, now=now) == alice
    assert users.use_sign_in_link(conn, fresh, SECRET, now=now) == alice
    # Twelve hours on, the last session has expired too.
    later = now + timedelta(seconds=users.SESSION_LIFETIME_SECONDS)
    assert keeper.prune(conn, later) == PrunedHistory(sessions=1)
    assert sign_in_counts(conn) == (0, 0)


def test_a_retention_of_none_still_drops_expired_sessions(conn: Conn) -> None:
    alice = users.create_user(conn, "alice", "correct horse battery", "viewer", actor="test")
    users.start_session(conn, alice, SECRET)
    forever = settings(keep_runs_days=None, keep_failed_days=None, keep_fires_days=None)
    later = db_now(conn) + timedelta(seconds=users.SESSION_LIFETIME_SECONDS)
    assert Reaper(forever).prune(conn, later) == PrunedHistory(sessions=1)


def test_expired_sessions_go_batch_after_batch_up_to_its_bound(
    conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = users.create_user(conn, "alice", "correct horse battery", "viewer", actor="test")
    for _ in range(7):
        users.start_session(conn, alice, SECRET)
    monkeypatch.setattr(reaper, "PRUNE_BATCH", 2)
    monkeypatch.setattr(reaper, "PRUNE_BATCHES", 3)
    keeper = Reaper(settings())
    later = db_now(conn) + timedelta(seconds=users.SESSION_LIFETIME_SECONDS)
    assert keeper.prune(conn, later).sessions == 6  # three full batches: the bound of a pass
    assert keeper.prune(conn, later).sessions == 1
    assert sign_in_counts(conn) == (0, 0)


def test_the_reaper_tick_prunes_sign_ins_on_the_clock_it_is_given(conn: Conn) -> None:
    alice = users.create_user(conn, "alice", "correct horse battery", "viewer", actor="test")
    users.start_session(conn, alice, SECRET)
    users.create_sign_in_link(conn, alice, SECRET)
    later = db_now(conn) + timedelta(seconds=users.SESSION_LIFETIME_SECONDS)
    report = Reaper(settings()).run_once(conn, later)
    assert report.pruned == PrunedHistory(sessions=1, sign_in_links=1)
