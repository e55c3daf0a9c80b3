"""Supported ranges: refused with one sentence at every door, held by CHECK constraints,
and extreme rows never crash the reaper or the trigger."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.catalog import workflows
from app.client import Sundial
from app.core import limits, migrate
from app.core.config import Settings
from app.core.errors import UsageError
from app.dags import dag_submission, workflow_shapes
from app.runs import run_inserts, submission
from app.runs.run_inserts import NewRun
from app.scheduling import schedule_spec, schedules
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import create_schedule
from app.services.reaper import Reaper
from app.services.trigger import Trigger
from tests.helpers.commands import run_sundial
from tests.helpers.databases import count

Conn = psycopg.Connection[dict[str, Any]]
BIG = str(2**31)
DEEP = "[" * 50_000 + "]" * 50_000
HUGE_INT = "9" * 5000
EVERY_MINUTE = ["schedule", "add", "s", "--handler", "noop", "--every", "60"]


# ---- the CLI: a sentence, exit 2, nothing written ------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["submit", "noop", "--at", "0001-01-01T00:00:00+14:00"], "--at must lie between 1970"),
        (["submit", "noop", "--at", "9999-12-31T23:59:59-12:00"], "--at must lie between 1970"),
        (["submit", "noop", "--timeout", BIG], "the timeout must be between 1 and"),
        (["submit", "noop", "--max-retries", BIG], "max retries must be between 0 and"),
        (["submit", "noop", "--priority", "32768"], "priority must be between"),
        (["submit", "noop", "--delay", "nan"], "the delay must be between 0 and"),
        (["submit", "noop", "--delay", "inf"], "the delay must be between 0 and"),
        (["submit", "noop", "--delay", "1e308"], "the delay must be between 0 and"),
        (["submit", "noop", "--after", "9" * 30], "a run to start after must be between 1"),
        (["submit", "noop", "--args", '{"a": "\\u0000"}'], "cannot contain a NUL"),
        (["submit", "noop", "--args", '{"a": "\\ud800"}'], "lone surrogate"),
        (["submit", "noop", "--args", '{"a": NaN}'], "cannot hold NaN or infinity"),
        (["submit", "noop", "--args", '{"a": ' + DEEP + "}"], "beyond what Sundial supports"),
        (["submit", "noop", "--args", '{"a": ' + HUGE_INT + "}"], "beyond what Sundial supports"),
        (["submit", "noop", "--args", '{"a": 1' + "0" * 30 + "}"], "must fit in 64 bits"),
        (["schedule", "add", "s", "--handler", "noop", "--every", BIG], "the interval must be"),
        (
            ["schedule", "add", "s", "--handler", "noop", "--every", "60", "--spread", BIG],
            "the spread window must be between 0 and",
        ),
        (
            ["schedule", "add", "s", "--handler", "noop", "--every", "60", "--catchup", BIG],
            "the catch-up limit must be between 1 and",
        ),
        (
            [*EVERY_MINUTE, "--catchup-window", BIG],
            "the catch-up window must be between 1 and",
        ),
        (
            [*EVERY_MINUTE, "--auto-pause-after", BIG],
            "auto-pause after must be between 1 and",
        ),
        (
            [*EVERY_MINUTE, "--start", "99999999d"],
            "lies past 2200-01-01",
        ),
        (
            [*EVERY_MINUTE, "--start", "0001-01-01T00:00", "--timezone", "Pacific/Kiritimati"],
            "must lie between 1970",
        ),
        (
            [*EVERY_MINUTE[:5], "--cron", "@daily", "--end", "9999-12-31T00:00"],
            "must lie between 1970",
        ),
        (["schedule", "fires", "s", "--limit", "-1"], "--limit: must be between 1 and"),
        (["show", "9" * 30], "RUN must be between 1 and"),
        (["job", "add", "j", "--handler", "noop", "--timeout", BIG], "the timeout must be"),
    ],
)
def test_out_of_range_input_is_one_sentence_exit_2_and_nothing_written(
    db_url: str, conn: Conn, args: list[str], message: str
) -> None:
    result = run_sundial(db_url, *args)
    assert result.returncode == 2, result.stderr
    # A value refused while the options are read comes after argparse's usage line.
    *usage, sentence = result.stderr.splitlines()
    assert sentence.startswith(f"sundial {args[0]}") and ": error: " in sentence
    assert message in sentence
    assert all(line.startswith("usage: ") for line in usage) and len(usage) <= 1
    for table in ("job_runs", "schedules", "job_definitions", "dag_runs"):
        assert count(conn, table) == 0, table


# ---- the Python doors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "run",
    [
        NewRun("noop", run_at=datetime(1, 1, 1, tzinfo=UTC)),
        NewRun("noop", run_at=datetime(9999, 12, 31, tzinfo=UTC)),
        NewRun("noop", delay=float("nan")),
        NewRun("noop", delay=1e308),
        NewRun("noop", timeout_seconds=2**31),
        NewRun("noop", max_retries=2**31),
        NewRun("noop", priority=-32768),
        NewRun("noop", {"a": float("inf")}),
        NewRun("noop", {"a": "\x00"}),
        NewRun("noop", {"a\ud800": 1}),
        NewRun("noop", {"a": 10**4000}),
        NewRun("noop", idempotency_key="k\x00"),
        NewRun("h\x00"),
        NewRun("x" * 201),
    ],
)
def test_runs_outside_the_ranges_are_refused_by_every_submit(conn: Conn, run: NewRun) -> None:
    with pytest.raises(run_inserts.SubmitError):
        submission.submit(conn, run)
    with pytest.raises(run_inserts.SubmitError):
        dag_submission.submit_dag(conn, {"a": run}, [])
    upstream = submission.submit(conn, NewRun("noop"))
    with pytest.raises(run_inserts.SubmitError):
        dag_submission.submit_after(conn, run, [upstream.id])
    assert count(conn, "job_runs") == 1 and count(conn, "dag_runs") == 0


def test_the_client_refuses_with_the_same_sentences(db_url: str, conn: Conn) -> None:
    with Sundial(db_url) as client:
        with pytest.raises(UsageError, match="must lie between 1970"):
            client.submit("noop", run_at=datetime(1, 1, 1, tzinfo=UTC))
        with pytest.raises(UsageError, match="unknown submit option 'colour'"):
            client.submit("noop", colour="red")
        with pytest.raises(UsageError, match="args must be a JSON object"):
            client.submit("noop", [])  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="the run id must be between 1"):
            client.get(2**63)
    assert count(conn, "job_runs") == 0


def test_workflows_refuse_names_and_args_outside_the_ranges(conn: Conn) -> None:
    conn.execute(
        "INSERT INTO job_definitions (id, name, handler) VALUES (gen_random_uuid(), 'j', 'noop')"
    )
    bad = [
        workflows.WorkflowSpec("w\x00", {"a": workflow_shapes.Step("j")}),
        workflows.WorkflowSpec("w", {"a\x00": workflow_shapes.Step("j")}),
        workflows.WorkflowSpec("w", {"a": workflow_shapes.Step("j", {"x": float("nan")})}),
        workflows.WorkflowSpec("w" * 201, {"a": workflow_shapes.Step("j")}),
    ]
    for spec in bad:
        with pytest.raises(workflows.WorkflowError):
            workflows.define(conn, spec, actor="test")
    with pytest.raises(workflows.WorkflowError):
        workflows.run_now(conn, "w\x00")
    assert count(conn, "workflows") == 0


@pytest.mark.parametrize(
    "changes",
    [
        {"every_seconds": 2**31},
        {"start_at": datetime(9999, 1, 1, tzinfo=UTC)},
        {"end_at": datetime(1, 1, 2, tzinfo=UTC)},
        {"catchup": True, "catchup_limit": 2**31},
        {"timezone": "UTC\x00"},
    ],
)
def test_schedule_update_refuses_values_outside_the_ranges(
    conn: Conn, changes: dict[str, Any]
) -> None:
    create_schedule(conn, ScheduleSpec(name="s", every_seconds=60, handler="noop"))
    before = conn.execute("SELECT * FROM schedules").fetchone()
    with pytest.raises(schedule_spec.ScheduleError):
        schedules.update_schedule(conn, "s", changes)
    assert conn.execute("SELECT * FROM schedules").fetchone() == before


# ---- CHECK constraints: rows written around Sundial ----------------------------------------


RAW_RUN = "INSERT INTO job_runs (handler, status, {cols}) VALUES ('noop', {vals})"


@pytest.mark.parametrize(
    ("cols", "vals"),
    [
        ("run_at", "'pending', '0001-01-01T00:00:00+14:00'"),
        ("run_at", "'pending', '9999-12-31T23:59:59Z'"),
        ("priority", "'pending', -32768"),
        ("base_priority", "'pending', -32768"),
        ("timeout_seconds", "'pending', 2147483647"),
        ("max_retries", "'pending', 2147483647"),
        ("attempt", "'running', 1"),  # running without a lease
        ("upstream_remaining", "'blocked', 0"),  # blocked without upstreams
    ],
)
def test_extreme_run_rows_are_refused_by_check_constraints(
    conn: Conn, cols: str, vals: str
) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(RAW_RUN.format(cols=cols, vals=vals))
    assert count(conn, "job_runs") == 0


@pytest.mark.parametrize(
    "column_value",
    [
        "start_at = '9999-01-01T00:00Z'",
        "next_fire_time = '0001-01-01T00:00Z'",
        "interval_seconds = 2147483647",
        "spread_seconds = 2147483647",
        "paused_until = 'infinity'",
    ],
)
def test_extreme_schedule_rows_are_refused_by_check_constraints(
    conn: Conn, column_value: str
) -> None:
    create_schedule(conn, ScheduleSpec(name="s", every_seconds=60, handler="noop"))
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(f"UPDATE schedules SET {column_value}")


# ---- the reaper and the trigger at the edges ------------------------------------------------


def test_aging_at_the_ends_of_the_priority_range_does_not_overflow(conn: Conn) -> None:
    long_ago = datetime(2000, 1, 1, tzinfo=UTC)
    top = submission.submit(conn, NewRun("noop", priority=32767, run_at=long_ago)).id
    bottom = submission.submit(conn, NewRun("noop", priority=-32767, run_at=long_ago)).id
    report = Reaper(Settings.from_env({})).run_once(conn)
    assert report.aged == 1  # the bottom one; the top one has nowhere to go
    rows = conn.execute(
        "SELECT id, priority FROM job_runs WHERE id = ANY(%s)", ([top, bottom],)
    ).fetchall()
    assert {r["id"]: r["priority"] for r in rows} == {top: 32767, bottom: -32766}


def test_a_schedule_ends_at_the_latest_supported_time(conn: Conn) -> None:
    start = limits.LATEST - timedelta(minutes=30)
    create_schedule(
        conn,
        ScheduleSpec(
            name="last", every_seconds=3600, start_at=start, handler="noop", exact_minute=True
        ),
        now=start - timedelta(days=1),
    )
    trigger = Trigger(Settings.from_env({}), holder="t")
    report = trigger.run_once(conn, now=start + timedelta(minutes=1))
    assert report.runs == 1
    row = conn.execute("SELECT next_fire_time FROM schedules").fetchone()
    assert row == {"next_fire_time": None}


def test_a_schedule_starting_in_year_9999_is_refused(conn: Conn) -> None:
    with pytest.raises(
        schedule_spec.ScheduleError, match="the start must lie between 1970-01-01 and 2200-01-01"
    ):
        create_schedule(
            conn,
            ScheduleSpec(
                name="far",
                every_seconds=60,
                start_at=datetime(9999, 1, 1, tzinfo=UTC),
                handler="noop",
            ),
        )
    assert count(conn, "schedules") == 0


# ---- migration 0006 fixes up the rows that break its constraints ----------------------------


def test_migration_0006_fixes_up_existing_rows(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url, "0005")
    with psycopg.connect(empty_db_url, autocommit=True, row_factory=dict_row) as conn:
        ids = {
            name: conn.execute(
                f"INSERT INTO job_runs (handler, status, {cols}) VALUES ('noop', {vals}) "
                "RETURNING id"
            ).fetchone()["id"]  # type: ignore[index]
            for name, cols, vals in [
                ("year_one", "run_at", "'pending', '0001-01-01T00:00:00+14:00'"),
                ("low", "priority, base_priority", "'pending', -32768, -32768"),
                ("unleased", "attempt", "'running', 1"),
                ("unblocked", "upstream_remaining", "'blocked', 0"),
                ("long", "timeout_seconds, max_retries", "'pending', 2147483647, 2147483647"),
            ]
        }
        job_id = conn.execute(
            "INSERT INTO job_definitions (id, name, handler) "
            "VALUES (gen_random_uuid(), repeat('x', 300), 'noop') RETURNING id"
        ).fetchone()["id"]  # type: ignore[index]
        migrate.upgrade(empty_db_url)
        job = conn.execute("SELECT name FROM job_definitions").fetchone()
        rows = {
            r["id"]: r
            for r in conn.execute(
                "SELECT id, status, run_at, priority, base_priority, lease_until, lease_owner, "
                "timeout_seconds, max_retries, last_error FROM job_runs"
            ).fetchall()
        }
    year_one = rows[ids["year_one"]]
    assert (
        year_one["status"] == "failed" and "outside the supported range" in year_one["last_error"]
    )
    assert year_one["run_at"] == datetime(1900, 1, 1, tzinfo=UTC)
    assert (rows[ids["low"]]["priority"], rows[ids["low"]]["base_priority"]) == (-32767, -32767)
    assert rows[ids["unleased"]]["lease_until"] is not None
    assert rows[ids["unleased"]]["status"] == "running"  # the reaper hands it back
    assert rows[ids["unblocked"]]["status"] == "pending"
    assert job == {"name": "x" * 160 + f" ({job_id})"}
    long = rows[ids["long"]]
    assert (long["timeout_seconds"], long["max_retries"]) == (limits.MAX_DURATION_SECONDS, 1000)


def test_a_run_left_unleased_before_the_migration_is_reaped(conn: Conn) -> None:
    """What the migration leaves for the reaper: an expired lease, handed back once."""
    conn.execute(
        "INSERT INTO job_runs (handler, status, attempt, lease_owner, lease_until) "
        "VALUES ('noop', 'running', 1, 'unknown (migration 0006)', now())"
    )
    report = Reaper(Settings.from_env({})).run_once(conn)
    assert [r.status for r in report.reaped] == ["pending"]


def test_args_at_the_limits_round_trip(conn: Conn) -> None:
    args = {
        "big": 2**63 - 1,
        "small": -(2**63),
        "text": "é\u2028",
        "deep": json.loads("[" * 31 + "]" * 31),
    }
    run_id = submission.submit(conn, NewRun("noop", args)).id
    row = conn.execute("SELECT args FROM job_runs WHERE id = %s", (run_id,)).fetchone()
    assert row == {"args": args}


def test_a_schedule_made_due_with_a_start_past_2200_ends_without_crashing_the_trigger(
    conn: Conn,
) -> None:
    create_schedule(conn, ScheduleSpec(name="late", cron="@hourly", handler="noop"))
    conn.execute(
        "UPDATE schedules SET start_at = '2299-06-01T00:00Z', "
        "next_fire_time = now() - interval '1 minute'"
    )
    report = Trigger(Settings.from_env({}), holder="t").run_once(conn)
    assert report.runs == 0
    row = conn.execute("SELECT next_fire_time FROM schedules").fetchone()
    assert row == {"next_fire_time": None}


@pytest.mark.parametrize("run_at", ["1900-01-01T00:00Z", "2299-12-31T23:59:59Z"])
def test_runs_at_the_edges_of_the_stored_range_can_be_shown(
    db_url: str, conn: Conn, run_at: str
) -> None:
    row = conn.execute(
        "INSERT INTO job_runs (handler, status, run_at) VALUES ('noop', 'pending', %s) "
        "RETURNING id",
        (run_at,),
    ).fetchone()
    assert row is not None
    Reaper(Settings.from_env({})).run_once(conn)
    shown = run_sundial(db_url, "show", str(row["id"]))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_at"].startswith(run_at[:4])
