"""`sundial schedule backfill` end to end: a dry run says what it would run and starts
nothing, a start creates the backfill (audited as the CLI's user), `backfill NAME` lists
it, `backfill cancel ID` cancels it; bad input exits 2 with one sentence."""

from __future__ import annotations

from typing import Any

import psycopg

from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import create_schedule
from tests.helpers.commands import run_sundial

Conn = psycopg.Connection[Any]


def test_backfill_dry_run_start_list_and_cancel(db_url: str, conn: Conn) -> None:
    create_schedule(conn, ScheduleSpec(name="nightly", cron="30 2 * * *",
                                       timezone="Europe/Berlin", handler="noop",
                                       overlap=OverlapPolicy.SKIP))  # fmt: skip
    args = ("schedule", "backfill", "nightly", "--from", "2026-03-27T00:00",
            "--to", "2026-03-30T23:00", "--concurrency", "2")  # fmt: skip
    dry = run_sundial(db_url, *args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "4 runs, the first for 2026-03-27 02:30 CET, the last for 2026-03-30 02:30 CEST" in (
        dry.stdout
    )
    assert "clock change: 02:30 does not exist on 29 Mar" in dry.stdout
    assert "one at a time (not 2)" in dry.stdout and "nothing was started" in dry.stdout
    assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone() == {"n": 0}

    started = run_sundial(db_url, *args)
    assert started.returncode == 0, started.stderr
    (row,) = conn.execute("SELECT id, created_by, concurrency FROM backfills").fetchall()
    assert f"backfill {row['id']} started" in started.stdout and row["concurrency"] == 2
    listed = run_sundial(db_url, "schedule", "backfill", "nightly")
    assert str(row["id"]) in listed.stdout and "running" in listed.stdout

    cancelled = run_sundial(db_url, "schedule", "backfill", "cancel", str(row["id"]))
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled: 0 runs cancelled" in cancelled.stdout
    again = run_sundial(db_url, "schedule", "backfill", "cancel", str(row["id"]))
    assert again.returncode == 2 and "already cancelled" in again.stderr
    actors = conn.execute(
        "SELECT DISTINCT actor FROM audit_log WHERE action LIKE 'schedule.backfill%'"
    ).fetchall()
    assert actors == [{"actor": row["created_by"]}]


def test_bad_ranges_exit_2_with_a_sentence(db_url: str, conn: Conn) -> None:
    create_schedule(conn, ScheduleSpec(name="nightly", cron="30 2 * * *", handler="noop"))
    future = run_sundial(db_url, "schedule", "backfill", "nightly", "--from",
                         "2026-01-01T00:00", "--to", "2099-01-01T00:00")  # fmt: skip
    assert future.returncode == 2 and "in the future" in future.stderr
    half = run_sundial(db_url, "schedule", "backfill", "nightly", "--from", "2026-01-01T00:00")
    assert half.returncode == 2 and "give both --from and --to" in half.stderr
    assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone() == {"n": 0}
