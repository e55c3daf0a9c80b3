"""The reaper prunes what is past its retention, and nothing else: the fire ledger, and the
sessions and sign-in links that expired without anyone signing out. Runs' history goes a
day at a time: tests/db/test_history.py."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from app.core.config import Settings
from app.handlers.jobs import Outcome, OutcomeStatus
from app.people import users
from app.scheduling import schedules
from app.scheduling.fire_decisions import FireOutcome
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import FireRecord, create_schedule
from app.services import reaper
from app.services.reaper import PrunedHistory, Reaper
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]
DAY = timedelta(days=1)
FAIL = Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)


def settings(**overrides: Any) -> Settings:
    return dataclasses.replace(Settings.from_env({}), **overrides)


def run_ids(conn: Conn) -> set[int]:
    return {r["id"] for r in conn.execute("SELECT id FROM job_runs").fetchall()}


def attempt_run_ids(conn: Conn) -> set[int]:
    return {r["run_id"] for r in conn.execute("SELECT run_id FROM job_run_attempts").fetchall()}


def but_settled(pruned: PrunedHistory | None) -> PrunedHistory:
    """What a pass pruned, less the finished days' partitions it vacuumed: a clock moved
    on past midnight settles the day before, which is not what these tests are about."""
    assert pruned is not None
    return dataclasses.replace(pruned, settled=0)


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
    assert but_settled(keeper.run_once(conn).pruned) == PrunedHistory()
    assert keeper.run_once(conn).pruned is None


def test_the_prune_cadence_follows_the_clock_the_reaper_is_given(conn: Conn) -> None:
    keeper = Reaper(settings())
    start = db_now(conn)
    interval = timedelta(seconds=reaper.PRUNE_INTERVAL_SECONDS)
    assert but_settled(keeper.run_once(conn, start).pruned) == PrunedHistory()
    assert keeper.run_once(conn, start + interval - timedelta(seconds=1)).pruned is None
    assert but_settled(keeper.run_once(conn, start + interval).pruned) == PrunedHistory()
    assert keeper.run_once(conn, start + interval).pruned is None
    # A clock set back (a test moving time, the database's clock corrected) prunes again
    # rather than waiting for the old time to come round.
    assert but_settled(keeper.run_once(conn, start).pruned) == PrunedHistory()


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

    assert but_settled(keeper.prune(conn, now)) == PrunedHistory(sessions=3, sign_in_links=1)
    assert sign_in_counts(conn) == (1, 1)
    assert users.session_user(conn, kept, SECRET, now=now) == alice
    assert users.use_sign_in_link(conn, fresh, SECRET, now=now) == alice
    # Twelve hours on, the last session has expired too.
    later = now + timedelta(seconds=users.SESSION_LIFETIME_SECONDS)
    assert but_settled(keeper.prune(conn, later)) == PrunedHistory(sessions=1)
    assert sign_in_counts(conn) == (0, 0)


def test_a_retention_of_none_still_drops_expired_sessions(conn: Conn) -> None:
    alice = users.create_user(conn, "alice", "correct horse battery", "viewer", actor="test")
    users.start_session(conn, alice, SECRET)
    forever = settings(retention_days=None, keep_fires_days=None)
    later = db_now(conn) + timedelta(seconds=users.SESSION_LIFETIME_SECONDS)
    assert but_settled(Reaper(forever).prune(conn, later)) == PrunedHistory(sessions=1)


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
    assert but_settled(report.pruned) == PrunedHistory(sessions=1, sign_in_links=1)
