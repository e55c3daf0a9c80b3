"""Exclusion calendars against a real database: the trigger records fires on a holiday or
in a blackout window as `excluded` and runs nothing for them; every other fire runs as
before, and every change to a calendar is audited."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
import pytest

from app.scheduling import calendars
from app.scheduling.calendars import CalendarError, CalendarSpec, WindowSpec
from app.services.trigger import Trigger
from tests.helpers.schedules import add, ledger, run_fire_times, settings
from tests.helpers.waits import utc

Conn = psycopg.Connection[dict[str, Any]]
START = utc("2026-12-23T12:00")


def tick_at(trigger: Trigger, conn: Conn, instants: list[datetime]) -> None:
    for now in instants:
        trigger.run_once(conn, now=now)


def test_fires_on_a_holiday_are_excluded_and_the_next_day_runs(conn: Conn) -> None:
    calendars.create(conn, CalendarSpec(name="Germany", country="de"), actor="alice")
    daily = add(conn, "daily", now=START, cron="0 9 * * *", timezone="Europe/Berlin")
    plain = add(conn, "plain", now=START, cron="0 9 * * *", timezone="Europe/Berlin")
    calendars.assign(conn, "daily", "Germany", actor="alice")
    # 09:00 in Berlin is 08:00 UTC; 25 and 26 Dec are public holidays in Germany
    days = [utc(f"2026-12-{d}T08:00:01") for d in (24, 25, 26, 27)]
    tick_at(Trigger(settings()), conn, days)
    rows = ledger(conn, daily)
    assert [r["outcome"] for r in rows] == ["enqueued", "excluded", "excluded", "enqueued"]
    assert "public holiday in DE: Christmas Day" in rows[1]["detail"]
    assert "calendar 'Germany'" in rows[1]["detail"]
    assert rows[1]["run_id"] is None and rows[2]["run_id"] is None
    assert run_fire_times(conn, daily) == [utc("2026-12-24T08:00"), utc("2026-12-27T08:00")]
    # the schedule without a calendar fired every day, one ledger row per fire as before
    assert [r["outcome"] for r in ledger(conn, plain)] == ["enqueued"] * 4
    assert len(run_fire_times(conn, plain)) == 4


def test_schedules_sharing_a_rule_and_a_calendar_are_each_excluded_on_its_holidays(
    conn: Conn,
) -> None:
    """Schedules alike in all but their job are locked as one group; with a calendar, each
    is still decided on its own, and each gets its own run on the days that are not off."""
    calendars.create(conn, CalendarSpec(name="Germany", country="de"), actor="alice")
    names = [f"daily-{i}" for i in range(5)]
    ids = [add(conn, n, now=START, cron="0 9 * * *", timezone="Europe/Berlin") for n in names]
    for name in names:
        calendars.assign(conn, name, "Germany", actor="alice")
    tick_at(Trigger(settings()), conn, [utc(f"2026-12-{d}T08:00:01") for d in (24, 25)])
    for sid in ids:
        assert [r["outcome"] for r in ledger(conn, sid)] == ["enqueued", "excluded"]
        assert run_fire_times(conn, sid) == [utc("2026-12-24T08:00")]
    jobs = conn.execute("SELECT count(DISTINCT job_id) AS n FROM job_runs").fetchone()
    assert jobs is not None and jobs["n"] == 5


def test_fires_inside_a_blackout_window_are_excluded_up_to_its_end(conn: Conn) -> None:
    calendars.create(conn, CalendarSpec(name="quarter"), actor="alice")
    window = WindowSpec("quarter close", "2026-12-23T14:00", "2026-12-23T16:00", "UTC")
    calendars.add_window(conn, "quarter", window, actor="alice")
    hourly = add(conn, "hourly", now=START, cron="0 * * * *")
    calendars.assign(conn, "hourly", "quarter", actor="alice")
    hours = [utc(f"2026-12-23T{h}:00:01") for h in (13, 14, 15, 16)]
    tick_at(Trigger(settings()), conn, hours)
    assert [r["outcome"] for r in ledger(conn, hourly)] == [
        "enqueued", "excluded", "excluded", "enqueued",
    ]  # fmt: skip
    assert "blackout window 'quarter close'" in ledger(conn, hourly)[1]["detail"]
    assert run_fire_times(conn, hourly) == [utc("2026-12-23T13:00"), utc("2026-12-23T16:00")]
    next_fire = conn.execute("SELECT next_fire_time FROM schedules WHERE id = %s", (hourly,))
    assert next_fire.fetchone()["next_fire_time"] == utc("2026-12-23T17:00")


def test_bad_input_writes_nothing_and_each_change_is_audited(conn: Conn) -> None:
    with pytest.raises(CalendarError, match="not a country") as unknown:
        calendars.create(conn, CalendarSpec(name="x", country="XX"), actor="alice")
    assert unknown.value.field == "country"
    with pytest.raises(CalendarError, match="no subdivision"):
        calendars.create(conn, CalendarSpec(name="x", country="DE", subdivision="ZZ"), actor="a")
    calendars.create(
        conn, CalendarSpec(name="Bavaria", country="DE", subdivision="by"), actor="alice"
    )
    backwards = WindowSpec("oops", "2026-12-02T00:00", "2026-12-01", "UTC")
    with pytest.raises(CalendarError, match="must come after its start") as late:
        calendars.add_window(conn, "Bavaria", backwards, actor="alice")
    assert late.value.field == "ends_at"
    with pytest.raises(CalendarError, match="already exists"):
        calendars.create(conn, CalendarSpec(name="Bavaria"), actor="alice")
    assert conn.execute("SELECT count(*) AS n FROM blackout_windows").fetchone()["n"] == 0
    row = calendars.get(conn, "Bavaria")
    assert (row["country"], row["subdivision"]) == ("DE", "BY")
    calendars.update(conn, "Bavaria", CalendarSpec(name="Bayern", country="DE"), actor="bob")
    calendars.delete(conn, "Bayern", actor="bob")
    actions = conn.execute("SELECT actor, action FROM audit_log ORDER BY id").fetchall()
    assert [(a["actor"], a["action"]) for a in actions] == [
        ("alice", "calendar.create"), ("bob", "calendar.update"), ("bob", "calendar.delete"),
    ]  # fmt: skip


def test_deleting_a_calendar_leaves_its_schedules_without_one(conn: Conn) -> None:
    calendars.create(conn, CalendarSpec(name="short-lived"), actor="alice")
    add(conn, "nightly", now=START, cron="0 2 * * *")
    calendars.assign(conn, "nightly", "short-lived", actor="alice")
    assert calendars.get(conn, "short-lived")["schedules"] == ["nightly"]
    calendars.delete(conn, "short-lived", actor="alice")
    found = conn.execute("SELECT calendar_id FROM schedules WHERE name = 'nightly'").fetchone()
    assert found["calendar_id"] is None
    audit = conn.execute(
        "SELECT details FROM audit_log WHERE action = 'schedule.calendar'"
    ).fetchone()
    assert audit["details"] == {"before": {"calendar": None}, "after": {"calendar": "short-lived"}}
