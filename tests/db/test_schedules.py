"""Schedule operations: validation with one-sentence errors and nothing half-written, handler
checks against registered workers, pause/resume/run now/delete, and the `sundial schedule`
commands as a person runs them."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from app.catalog import job_definitions
from app.catalog.job_definitions import JobError, JobSpec
from app.scheduling import schedule_reads, schedules
from app.scheduling.cron import DstRepeated, DstSkipped
from app.scheduling.fire_decisions import FireOutcome, OverlapPolicy
from app.scheduling.schedule_spec import ScheduleError, ScheduleSpec, parse_catchup, parse_when
from app.scheduling.schedules import create_schedule
from tests.helpers.commands import run_sundial
from tests.helpers.databases import count
from tests.helpers.waits import utc, wait_until_blocked

Conn = psycopg.Connection[dict[str, Any]]
NOW = datetime(2026, 5, 1, 9, 59, 30, tzinfo=UTC)


def spec(**kw: Any) -> ScheduleSpec:
    kw.setdefault("name", "nightly")
    kw.setdefault("handler", "noop")
    if "every_seconds" not in kw:
        kw.setdefault("cron", "30 2 * * *")
    return ScheduleSpec.model_construct(**kw)


def register_worker(conn: Conn, handlers: list[str], *, live: bool = True) -> None:
    conn.execute(
        "INSERT INTO workers (id, host, pid, concurrency, handlers, last_seen, stopped_at) "
        "VALUES (gen_random_uuid()::text, 'h', 1, 1, %s, "
        "CASE WHEN %s THEN now() ELSE now() - interval '1 day' END, "
        "CASE WHEN %s THEN NULL ELSE now() - interval '1 day' END)",
        (Jsonb(handlers), live, live),
    )


# ---- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "message", "field"),
    [
        ({"cron": "0 0 31 2 *"}, "cron expression '0 0 31 2 *' never fires", "cron"),
        ({"cron": "61 * * * *"}, "is not a valid cron expression", "cron"),
        ({"cron": "0 0 * *"}, "must have 5 fields", "cron"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'", "timezone"),
        ({"timezone": ""}, "unknown time zone ''", "timezone"),
        (
            {"every_seconds": 0, "cron": None},
            "the interval must be a positive number",
            "every_seconds",
        ),
        (
            {"every_seconds": -5, "cron": None},
            "the interval must be a positive number",
            "every_seconds",
        ),
        (
            {"every_seconds": 60, "cron": "@daily"},
            "exactly one of a cron expression (--cron) or an interval",
            "cron",
        ),
        ({"cron": None}, "exactly one of a cron expression (--cron) or an interval", "cron"),
        ({"args": [1, 2]}, "args must be a JSON object", "args"),
        ({"args": {"when": NOW}}, "args must hold only JSON values", "args"),
        ({"handler": None}, "give one of --handler", "job"),
        ({"job": "reports"}, "give one of --handler", "job"),
        (
            {"handler": None, "workflow": "missing"},
            "there is no workflow named 'missing'",
            "workflow",
        ),
        ({"handler": None, "job": "missing"}, "there is no job definition named 'missing'", "job"),
        ({"name": " spaced "}, "schedule name must be", "name"),
        ({"name": ""}, "a schedule name cannot be empty", "name"),
        ({"name": "two\nlines"}, "a schedule name cannot contain control characters", "name"),
        ({"end_at": utc("2026-04-01T00:00")}, "its end 2026-04-01 00:00 UTC has passed", "end_at"),
        ({"end_at": utc("2026-05-01T12:00")}, "its end comes before its first fire", "end_at"),
        (
            {"start_at": utc("2026-06-01T00:00"), "end_at": utc("2026-05-02T00:00")},
            "the end of a schedule must come after its start",
            "end_at",
        ),
        ({"catchup_limit": 3}, "a catch-up limit needs catch-up on", "catchup_limit"),
        (
            {"catchup": True, "catchup_limit": 0},
            "the catch-up limit must be between 1 and",
            "catchup_limit",
        ),
        (
            {"catchup_window_seconds": 0},
            "the catch-up window must be between 1 and",
            "catchup_window_seconds",
        ),
        ({"auto_pause_after": 0}, "auto-pause after must be between 1 and", "auto_pause_after"),
        ({"spread_seconds": -1}, "the spread window must be between 0 and", "spread_seconds"),
        ({"timeout_seconds": 0}, "the timeout must be between 1 and", "timeout_seconds"),
        ({"execution_model": "greenlet"}, "execution model must be one of", "execution_model"),
        ({"priority": 40000}, "priority must be between", "priority"),
    ],
)
def test_bad_input_is_one_sentence_naming_its_field_and_writes_nothing(
    conn: Conn, kw: dict[str, Any], message: str, field: str
) -> None:
    with pytest.raises(ScheduleError, match=re.escape(message)) as caught:
        create_schedule(conn, spec(**kw), now=NOW)
    assert "\n" not in str(caught.value)
    assert caught.value.field == field  # where a page puts it and what the API returns
    assert count(conn, "schedules") == 0
    assert count(conn, "job_definitions") == 0


def test_a_rare_cron_is_fine(conn: Conn) -> None:
    created = create_schedule(conn, spec(cron="0 0 29 2 *"), now=NOW)
    assert created.next_fire_time == utc("2028-02-29T00:00")
    assert created.warnings == []


def test_a_schedule_gets_its_job_definition_and_its_first_fire(conn: Conn) -> None:
    created = create_schedule(
        conn,
        spec(
            timezone="Europe/Berlin",
            args={"to": "ops"},
            priority=5,
            timeout_seconds=60,
            max_retries=1,
            execution_model="thread",
            overlap=OverlapPolicy.QUEUE,
            catchup=True,
            catchup_limit=3,
            catchup_window_seconds=3600,
            dst_skipped=DstSkipped.SKIP,
            dst_repeated=DstRepeated.BOTH,
            auto_pause_after=4,
        ),
        now=NOW,
    )
    assert created.next_fire_time == utc("2026-05-02T00:30")  # 02:30 CEST
    job = conn.execute("SELECT * FROM job_definitions").fetchone()
    assert job is not None
    assert (job["name"], job["handler"], job["args"], job["priority"]) == (
        "nightly",
        "noop",
        {"to": "ops"},
        5,
    )
    row = conn.execute("SELECT * FROM schedules").fetchone()
    assert row is not None
    assert row["owns_job"] and row["job_id"] == job["id"]
    assert (row["overlap"], row["catchup_limit"], row["dst_skipped"], row["dst_repeated"]) == (
        "queue",
        3,
        "skip",
        "both",
    )


def test_names_are_unique_and_a_second_schedule_can_share_a_job(conn: Conn) -> None:
    create_schedule(conn, spec(), now=NOW)
    with pytest.raises(ScheduleError, match="a schedule named 'nightly' already exists"):
        create_schedule(conn, spec(), now=NOW)
    create_schedule(conn, spec(name="weekly", handler=None, job="nightly"), now=NOW)
    assert count(conn, "job_definitions") == 1


def test_dst_options_on_an_elapsed_time_schedule_warn(conn: Conn) -> None:
    created = create_schedule(
        conn, spec(cron="*/15 * * * *", dst_repeated=DstRepeated.BOTH), now=NOW
    )
    assert created.warnings and "only apply to cron schedules at fixed hours" in created.warnings[0]


# ---- handlers -----------------------------------------------------------------------------


def test_with_no_worker_yet_builtins_pass_and_others_warn(conn: Conn) -> None:
    assert create_schedule(conn, spec(handler="sleep"), now=NOW).warnings == []
    created = create_schedule(conn, spec(name="custom", handler="send_report"), now=NOW)
    assert created.warnings == [
        "no worker has registered yet, so handler 'send_report' could not be checked"
    ]


def test_handlers_are_checked_against_what_live_workers_registered(conn: Conn) -> None:
    register_worker(conn, ["noop", "send_report"])
    register_worker(conn, ["old_handler"], live=False)
    assert create_schedule(conn, spec(handler="send_report"), now=NOW).warnings == []
    with pytest.raises(ScheduleError, match="unknown handler 'old_handler': workers know"):
        create_schedule(conn, spec(name="old", handler="old_handler"), now=NOW)
    with pytest.raises(ScheduleError, match="unknown handler 'typo'"):
        create_schedule(conn, spec(name="typo", handler="typo"), now=NOW)


def test_when_no_worker_is_live_the_last_registrations_count(conn: Conn) -> None:
    register_worker(conn, ["send_report"], live=False)
    assert create_schedule(conn, spec(handler="send_report"), now=NOW).warnings == []
    with pytest.raises(ScheduleError, match="unknown handler 'typo'"):
        create_schedule(conn, spec(name="typo", handler="typo"), now=NOW)


# ---- operations ---------------------------------------------------------------------------


def test_pause_needs_a_future_expiry_and_resume_says_whether_it_was_paused(conn: Conn) -> None:
    create_schedule(conn, spec(), now=NOW)
    with pytest.raises(ScheduleError, match="the pause must end in the future"):
        schedules.pause(conn, "nightly", until=NOW - timedelta(minutes=1), now=NOW)
    assert not schedules.resume(conn, "nightly", now=NOW)
    schedules.pause(conn, "nightly", note="audit", until=NOW + timedelta(days=1), now=NOW)
    row = conn.execute("SELECT active, paused_note, paused_until, paused_at FROM schedules")
    assert row.fetchone() == {
        "active": False,
        "paused_note": "audit",
        "paused_until": NOW + timedelta(days=1),
        "paused_at": NOW,
    }
    assert schedules.resume(conn, "nightly", now=NOW)
    with pytest.raises(ScheduleError, match="there is no schedule named 'nope'"):
        schedules.pause(conn, "nope", now=NOW)


def test_delete_removes_the_ledger_and_its_own_job_but_runs_keep_history(conn: Conn) -> None:
    create_schedule(conn, spec(), now=NOW)
    create_schedule(conn, spec(name="other", handler=None, job="nightly"), now=NOW)
    run_id = schedules.run_now(conn, "nightly", now=NOW).run_id
    schedules.delete(conn, "nightly")
    assert count(conn, "schedule_fires") == 0
    assert count(conn, "job_definitions") == 1  # still used by "other"
    schedules.delete(conn, "other")
    assert count(conn, "job_definitions") == 1  # "other" did not create it
    assert conn.execute("SELECT id FROM job_runs").fetchone() == {"id": run_id}


def test_a_schedule_deleted_by_a_cascade_takes_only_its_own_ledger(conn: Conn) -> None:
    create_schedule(conn, spec(), now=NOW)
    create_schedule(conn, spec(name="hourly"), now=NOW)
    schedules.run_now(conn, "nightly", now=NOW)
    schedules.run_now(conn, "hourly", now=NOW)
    conn.execute("DELETE FROM job_definitions WHERE name = 'nightly'")  # cascades to schedules
    assert count(conn, "schedules") == 1
    [left] = conn.execute("SELECT schedule_id FROM schedule_fires").fetchall()
    assert left["schedule_id"] == conn.execute("SELECT id FROM schedules").fetchone()["id"]


def test_a_job_deleted_while_a_schedule_of_it_is_created_is_refused_and_the_schedule_stays(
    db_url: str, conn: Conn
) -> None:
    """A person deletes a job (not its schedules) while another creates a schedule running
    it. The delete waits for the job's row, which the new schedule's insert holds; it must
    then see that schedule and refuse, not delete it by cascade, unsaid and unaudited."""
    job_definitions.create(conn, JobSpec(name="report", handler="noop"), actor="test")
    refused: list[JobError] = []

    def delete(other: Conn) -> None:
        try:
            job_definitions.delete(other, "report", actor="test")
        except JobError as exc:
            refused.append(exc)

    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as other:
        deleting = threading.Thread(target=delete, args=(other,))
        with conn.transaction():
            create_schedule(conn, spec(handler=None, job="report"), now=NOW)
            deleting.start()
            wait_until_blocked(conn, other.info.backend_pid)
        deleting.join(timeout=10)
    assert [str(exc) for exc in refused] == [
        "job 'report' cannot be deleted: schedule 'nightly' runs it; delete the schedules too "
        "(--with-schedules) or move them first"
    ]
    assert [r["name"] for r in conn.execute("SELECT name FROM schedules")] == ["nightly"]


def test_deleting_the_only_schedule_of_its_own_job_deletes_the_job(conn: Conn) -> None:
    create_schedule(conn, spec(), now=NOW)
    schedules.delete(conn, "nightly")
    assert count(conn, "job_definitions") == 0
    create_schedule(conn, spec(), now=NOW)  # the name is free again


def test_run_now_copies_the_job_definition_into_the_run(conn: Conn) -> None:
    create_schedule(conn, spec(args={"x": 1}, priority=7, max_retries=0), now=NOW)
    run_id = schedules.run_now(conn, "nightly", now=NOW).run_id
    run = conn.execute("SELECT * FROM job_runs WHERE id = %s", (run_id,)).fetchone()
    assert run is not None
    assert (run["handler"], run["args"], run["priority"], run["max_retries"]) == (
        "noop",
        {"x": 1},
        7,
        0,
    )
    [fire] = schedule_reads.list_fires(conn, "nightly")
    assert (fire["outcome"], fire["manual"], fire["run_id"]) == (FireOutcome.ENQUEUED, True, run_id)


def schedule_row(conn: Conn) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM schedules").fetchone()
    assert row is not None
    return row


def test_update_of_the_rule_recomputes_the_next_fire_and_keeps_the_ledger(conn: Conn) -> None:
    create_schedule(conn, spec(), now=NOW)  # 02:30 UTC daily
    schedules.run_now(conn, "nightly", now=NOW)
    later = NOW + timedelta(hours=1)
    updated = schedules.update_schedule(
        conn, "nightly", {"cron": "0 9 * * *", "timezone": "Europe/Berlin"}, now=later
    )
    assert updated.changed == ["cron", "timezone"]
    # 09:00 in Berlin (CEST, UTC+2) on the day after `later`, 2026-05-01 10:59:30 UTC
    assert updated.next_fire_time == datetime(2026, 5, 2, 7, 0, tzinfo=UTC)
    row = schedule_row(conn)
    assert (row["cron"], row["timezone"], row["next_fire_time"], row["updated_at"]) == (
        "0 9 * * *",
        "Europe/Berlin",
        updated.next_fire_time,
        later,
    )
    assert len(schedule_reads.list_fires(conn, "nightly")) == 1


def test_update_from_cron_to_an_interval_and_of_policies_alone(conn: Conn) -> None:
    create_schedule(conn, spec(), now=NOW)
    before = schedule_row(conn)["next_fire_time"]
    policies = {"overlap": OverlapPolicy.QUEUE, "catchup": True, "catchup_limit": 5}
    updated = schedules.update_schedule(conn, "nightly", policies, now=NOW)
    assert updated.changed == ["overlap", "catchup", "catchup_limit"]
    assert updated.next_fire_time == before  # the rule did not change
    updated = schedules.update_schedule(conn, "nightly", {"every_seconds": 600}, now=NOW)
    row = schedule_row(conn)
    assert (row["cron"], row["interval_seconds"], row["overlap"]) == (None, 600, "queue")
    assert updated.next_fire_time is not None and updated.next_fire_time > NOW


def test_a_paused_schedule_stays_paused_when_updated(conn: Conn) -> None:
    create_schedule(conn, spec(), now=NOW)
    schedules.pause(conn, "nightly", note="audit", now=NOW)
    schedules.update_schedule(conn, "nightly", {"cron": "0 3 * * *"}, now=NOW)
    row = schedule_row(conn)
    assert (row["active"], row["paused_note"], row["cron"]) == (False, "audit", "0 3 * * *")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"cron": "0 0 31 2 *"}, "never fires"),
        ({"timezone": "Nowhere/City"}, "unknown time zone"),
        ({"every_seconds": -5}, "positive number of seconds"),
        ({"catchup_limit": 3}, "needs catch-up on"),
        ({"end_at": NOW - timedelta(days=1)}, "has passed"),
        ({"handler": "fail"}, "handler cannot be changed here"),
        ({"cron": "0 4 * * *", "calendar": "Atlantis"}, "no exclusion calendar named 'Atlantis'"),
    ],
)
def test_a_bad_update_changes_nothing(conn: Conn, changes: dict[str, Any], message: str) -> None:
    create_schedule(conn, spec(), now=NOW)
    before = schedule_row(conn)
    with pytest.raises(ScheduleError, match=message):
        schedules.update_schedule(conn, "nightly", changes, now=NOW)
    assert schedule_row(conn) == before


# ---- parsing ------------------------------------------------------------------------------


def test_times_are_read_in_the_schedules_zone() -> None:
    assert parse_when("2026-07-01T09:00", "Europe/Berlin", NOW) == utc("2026-07-01T07:00")
    assert parse_when("2026-07-01T09:00+00:00", "Europe/Berlin", NOW) == utc("2026-07-01T09:00")
    assert parse_when("2026-07-01T09:00Z", "Europe/Berlin", NOW) == utc("2026-07-01T09:00")
    assert parse_when("90m", "UTC", NOW) == NOW + timedelta(minutes=90)
    assert parse_when("2d", "UTC", NOW) == NOW + timedelta(days=2)
    with pytest.raises(ScheduleError, match="does not exist in America/New_York"):
        parse_when("2026-03-08T02:30", "America/New_York", NOW)
    with pytest.raises(ScheduleError, match="is not a time"):
        parse_when("next tuesday", "UTC", NOW)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("latest", (False, None)), ("all", (True, None)), ("5", (True, 5)), (" ALL ", (True, None))],
)
def test_catchup_option(text: str, expected: tuple[bool, int | None]) -> None:
    assert parse_catchup(text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "some", ""])
def test_bad_catchup_option(text: str) -> None:
    with pytest.raises(ScheduleError, match="catch-up must be latest, all or a positive"):
        parse_catchup(text)


# ---- the schema agrees with the enums -----------------------------------------------------


@pytest.mark.parametrize(
    ("constraint", "values"),
    [
        ("schedule_fires_outcome", {o.value for o in FireOutcome}),
        ("schedules_overlap", {o.value for o in OverlapPolicy}),
        ("schedules_dst_skipped", {o.value for o in DstSkipped}),
        ("schedules_dst_repeated", {o.value for o in DstRepeated}),
    ],
)
def test_check_constraints_match_the_enums(conn: Conn, constraint: str, values: set[str]) -> None:
    row = conn.execute(
        "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = %s",
        (constraint,),
    ).fetchone()
    assert row is not None
    assert set(re.findall(r"'([a-z_]+)'::text", row["def"])) == values


# ---- the commands -------------------------------------------------------------------------


def test_schedule_commands_end_to_end(db_url: str) -> None:
    add = run_sundial(
        db_url,
        "schedule",
        "add",
        "berlin-report",
        "--cron",
        "30 2 * * 1-5",
        "--timezone",
        "Europe/Berlin",
        "--handler",
        "noop",
        "--args",
        '{"to": "ops"}',
        "--catchup",
        "all",
        "--overlap",
        "queue",
    )
    assert add.returncode == 0, add.stderr
    assert re.match(r"schedule 'berlin-report' created; first fire \S+ 02:30 CES?T", add.stdout)

    listed = run_sundial(db_url, "schedule", "list")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("berlin-report"))
    assert "30 2 * * 1-5" in line and "Europe/Berlin" in line and "02:30" in line
    assert "queue" in line and "all" in line and "active" in line

    paused = run_sundial(
        db_url, "schedule", "pause", "berlin-report", "--note", "audit", "--until", "2h"
    )
    assert paused.returncode == 0, paused.stderr
    assert "paused until" in paused.stdout
    assert "paused until" in run_sundial(db_url, "schedule", "list").stdout
    assert run_sundial(db_url, "schedule", "resume", "berlin-report").stdout.strip() == (
        "schedule 'berlin-report' resumed"
    )

    run_now = run_sundial(db_url, "schedule", "run-now", "berlin-report")
    assert run_now.returncode == 0, run_now.stderr
    run_id = int(run_now.stdout)
    fires = run_sundial(db_url, "schedule", "fires", "berlin-report")
    assert fires.returncode == 0, fires.stderr
    assert "enqueued" in fires.stdout and "manual; run now" in fires.stdout
    assert str(run_id) in fires.stdout

    deleted = run_sundial(db_url, "schedule", "delete", "berlin-report")
    assert deleted.returncode == 0, deleted.stderr
    assert run_sundial(db_url, "schedule", "list").stdout.strip() == "no schedules"


def test_schedule_update_command(db_url: str, conn: Conn) -> None:
    added = run_sundial(
        db_url, "schedule", "add", "report", "--cron", "0 6 * * *", "--handler", "noop",
        "--end", "2099-01-01T00:00", "--auto-pause-after", "3",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    updated = run_sundial(
        db_url, "schedule", "update", "report", "--cron", "30 7 * * 1-5",
        "--timezone", "America/New_York", "--end", "none", "--auto-pause-after", "off",
        "--exact-minute",
    )  # fmt: skip
    assert updated.returncode == 0, updated.stderr
    assert re.match(
        r"schedule 'report' updated \(cron, timezone, end_at, exact_minute, auto_pause_after\); "
        r"next fire \S+ 07:30 E[SD]T",
        updated.stdout,
    )
    row = schedule_row(conn)
    assert (row["end_at"], row["auto_pause_after"], row["exact_minute"]) == (None, None, True)
    again = run_sundial(db_url, "schedule", "update", "report", "--exact-minute")
    assert "nothing changed" in again.stdout
    for args, message in (
        ([], "nothing to change"),
        (["--cron", "61 * * * *"], "sundial schedule: error:"),
        (["--catchup-window", "soon"], "--catchup-window takes a whole number"),
    ):
        failed = run_sundial(db_url, "schedule", "update", "report", *args)
        assert failed.returncode == 2 and message in failed.stderr, failed.stderr
    missing = run_sundial(db_url, "schedule", "update", "ghost", "--every", "60")
    assert missing.returncode == 2 and "there is no schedule named 'ghost'" in missing.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "0 0 31 2 *", "--handler", "noop"], "never fires"),
        (
            ["--cron", "0 1 * * *", "--timezone", "Nowhere/City", "--handler", "noop"],
            "unknown time zone",
        ),
        (["--every", "0", "--handler", "noop"], "positive number of seconds"),
        (["--every", "60", "--handler", "noop", "--args", "[1]"], "must be a JSON object"),
        (["--every", "60", "--handler", "noop", "--catchup", "sometimes"], "catch-up must be"),
        (["--every", "60", "--handler", "noop", "--start", "soon"], "is not a time"),
    ],
)
def test_bad_schedule_add_exits_2_with_one_sentence(
    db_url: str, conn: Conn, args: list[str], message: str
) -> None:
    result = run_sundial(db_url, "schedule", "add", "bad", *args)
    assert result.returncode == 2
    assert result.stderr.startswith("sundial schedule: error:")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert count(conn, "schedules") == 0 and count(conn, "job_definitions") == 0


def test_an_unknown_schedule_is_a_usage_error(db_url: str) -> None:
    for action in ("pause", "resume", "run-now", "delete", "fires"):
        result = run_sundial(db_url, "schedule", action, "ghost")
        assert result.returncode == 2, action
        assert "there is no schedule named 'ghost'" in result.stderr
