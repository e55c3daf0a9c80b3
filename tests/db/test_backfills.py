"""Backfills against a real database: the fires a backfill creates are, one for one, the
rule's fires of the range in the schedule's zone (across DST changes), the ledger marks
them, the overlap policy and the concurrency cap bound what runs at once, fires already
in the ledger are left alone, bad input creates nothing, cancelling stops the rest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from app.core.errors import UsageError
from app.scheduling import backfills, schedules
from app.scheduling.cron import Recurrence, fires_between
from app.scheduling.fire_decisions import OverlapPolicy
from app.services.trigger import Trigger
from tests.helpers.processes import finish_run
from tests.helpers.schedules import add, ledger, run_fire_times, settings
from tests.helpers.waits import utc

Conn = psycopg.Connection[dict[str, Any]]
BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 2, 12, tzinfo=UTC)  # every range below lies in the past


def berlin(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=BERLIN).astimezone(UTC)


def backfill_runs(conn: Conn, backfill_id: Any) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT r.id, r.fire_time, r.status FROM schedule_fires f JOIN job_runs r "
        "ON r.id = f.run_id WHERE f.backfill_id = %s ORDER BY r.fire_time",
        (backfill_id,),
    ).fetchall()


def drain(conn: Conn, trigger: Trigger, backfill_id: Any, most_at_once: int) -> list[datetime]:
    """Tick the trigger and finish the backfill's pending runs, checking that never more
    than `most_at_once` of them are pending or running; the fire times in run order."""
    order: list[datetime] = []
    for tick in range(200):
        trigger.run_once(conn, now=NOW + timedelta(seconds=tick))
        active = [r for r in backfill_runs(conn, backfill_id) if r["status"] == "pending"]
        assert len(active) <= most_at_once
        if not active:
            break
        for run in active:
            finish_run(conn, run["id"])
            order.append(run["fire_time"])
    return order


def test_a_daily_0230_backfill_over_spring_forward_runs_exactly_the_rules_fires(
    conn: Conn,
) -> None:
    sid = add(conn, "nightly", cron="30 2 * * *", timezone="Europe/Berlin", now=NOW,
              overlap=OverlapPolicy.SKIP)  # fmt: skip
    start, end = berlin("2026-03-27T00:00"), berlin("2026-03-31T00:00")
    shown = backfills.start(
        conn, "nightly", start=start, end=end, concurrency=3, actor="ana", now=NOW
    )
    rule = Recurrence.from_cron("30 2 * * *", "Europe/Berlin")
    expected = [f.at for f in fires_between(rule, start, end)]
    # 02:30 does not exist on Sunday 29 March: it runs when the clocks jump, 03:00 CEST
    assert expected == [
        utc("2026-03-27T01:30"),
        utc("2026-03-28T01:30"),
        utc("2026-03-29T01:00"),
        utc("2026-03-30T00:30"),
    ]
    assert [f.at for f in shown.fires] == expected
    assert [note for _, note in shown.dst] == [
        "02:30 does not exist on 29 Mar (the clocks jump forward); runs at 03:00"
    ]
    assert shown.at_once == 1  # overlap "skip": one at a time, whatever the cap
    assert "one at a time (not 3)" in shown.overlap_words

    order = drain(conn, Trigger(settings()), shown.backfill_id, most_at_once=1)
    assert order == expected  # oldest first
    assert run_fire_times(conn, sid) == expected
    rows = ledger(conn, sid)
    assert [r["fire_time"] for r in rows] == expected
    assert {(r["outcome"], r["detail"], r["backfill_id"]) for r in rows} == {
        ("enqueued", "backfill", shown.backfill_id)
    }
    assert all(r["run_id"] is not None for r in rows)
    assert [r["local_time"].strftime("%d %H:%M") for r in rows] == [
        "27 02:30", "28 02:30", "29 02:30", "30 02:30"
    ]  # fmt: skip
    [done] = backfills.listed(conn, schedule_id=sid)
    assert (done["status"], done["done"], done["waiting"], done["running"]) == ("done", 4, 0, 0)
    audit = conn.execute("SELECT actor, action FROM audit_log WHERE action LIKE '%backfill%'")
    assert audit.fetchall() == [{"actor": "ana", "action": "schedule.backfill"}]


def test_an_hourly_backfill_over_fall_back_runs_both_two_oclocks_two_at_a_time(
    conn: Conn,
) -> None:
    sid = add(conn, "hourly", cron="0 * * * *", timezone="Europe/Berlin", now=NOW,
              overlap=OverlapPolicy.ALLOW)  # fmt: skip
    # Sunday 25 October 2026: 03:00 CEST becomes 02:00 CET, so 02:00 happens twice
    start = datetime(2026, 10, 25, 0, tzinfo=BERLIN)
    end = datetime(2026, 10, 25, 4, tzinfo=BERLIN)
    shown = backfills.start(
        conn, "hourly", start=start, end=end, concurrency=2, actor="ana", now=NOW
    )
    rule = Recurrence.from_cron("0 * * * *", "Europe/Berlin")
    expected = [f.at for f in fires_between(rule, start, end + timedelta(microseconds=1))]
    assert expected == [utc("2026-10-24T22:00") + timedelta(hours=h) for h in range(7)][:6]
    assert [f.at for f in shown.fires] == expected
    assert len(shown.dst) == 2 and all("happens twice" in n for _, n in shown.dst)
    assert shown.at_once == 2

    order = drain(conn, Trigger(settings()), shown.backfill_id, most_at_once=2)
    assert sorted(order) == expected
    assert run_fire_times(conn, sid) == expected
    local = [r["local_time"].strftime("%H:%M") for r in ledger(conn, sid)]
    assert local == ["00:00", "01:00", "02:00", "02:00", "03:00", "04:00"]


def test_fires_already_in_the_ledger_are_left_alone(conn: Conn) -> None:
    sid = add(conn, "daily", cron="0 6 * * *", timezone="Europe/Berlin", now=NOW)
    trigger = Trigger(settings())
    # the schedule really fired on 3 and 4 June
    conn.execute("UPDATE schedules SET next_fire_time = %s WHERE id = %s",
                 (berlin("2026-06-03T06:00"), sid))  # fmt: skip
    trigger.run_once(conn, now=berlin("2026-06-03T06:00"))
    trigger.run_once(conn, now=berlin("2026-06-04T06:00"))
    assert len(ledger(conn, sid)) == 2
    shown = backfills.start(conn, "daily", start=berlin("2026-06-01T00:00"),
                            end=berlin("2026-06-05T23:59"), actor="ana", now=NOW)  # fmt: skip
    assert [f.at for f in shown.fires] == [
        berlin("2026-06-01T06:00"), berlin("2026-06-02T06:00"), berlin("2026-06-05T06:00")
    ]  # fmt: skip
    assert [(a.at, a.outcome) for a in shown.left_alone] == [
        (berlin("2026-06-03T06:00"), "enqueued"), (berlin("2026-06-04T06:00"), "enqueued")
    ]  # fmt: skip
    for _ in range(4):
        for run in backfill_runs(conn, shown.backfill_id):
            if run["status"] == "pending":
                finish_run(conn, run["id"])
        trigger.run_once(conn, now=NOW)
    assert len(backfill_runs(conn, shown.backfill_id)) == 3
    marked = [r["fire_time"] for r in ledger(conn, sid) if r["backfill_id"] is not None]
    assert marked == [f.at for f in shown.fires]


@pytest.mark.parametrize(
    ("start", "end", "words"),
    [
        ("2026-03-10T00:00", "2026-03-01T00:00", "before its start"),
        ("2026-10-01T00:00", "2027-01-01T00:00", "in the future"),
        ("2026-01-01T00:00", "2026-03-01T00:00", "more than 10,000 fires"),
    ],
)
def test_bad_ranges_are_refused_with_a_sentence_and_create_nothing(
    conn: Conn, start: str, end: str, words: str
) -> None:
    add(conn, "minutely", cron="* * * * *", timezone="Europe/Berlin", now=NOW)
    with pytest.raises(UsageError, match=words):
        backfills.start(conn, "minutely", start=berlin(start), end=berlin(end), actor="ana",
                        now=NOW)  # fmt: skip
    assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone() == {"n": 0}


def test_a_dry_run_previews_and_creates_nothing(conn: Conn) -> None:
    add(conn, "daily", cron="0 6 * * *", timezone="Europe/Berlin", now=NOW)
    shown = backfills.start(conn, "daily", start=berlin("2026-06-01T00:00"),
                            end=berlin("2026-06-10T00:00"), dry_run=True, actor="ana",
                            now=NOW)  # fmt: skip
    assert shown.count == 9 and shown.backfill_id is None
    assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone() == {"n": 0}


def test_cancelling_cancels_the_waiting_runs_and_submits_no_more(conn: Conn) -> None:
    sid = add(conn, "hourly", cron="0 * * * *", timezone="UTC", now=NOW)
    shown = backfills.start(conn, "hourly", start=utc("2026-06-01T00:00"),
                            end=utc("2026-06-01T09:00"), concurrency=3, actor="ana",
                            now=NOW)  # fmt: skip
    trigger = Trigger(settings())
    trigger.run_once(conn, now=NOW)
    runs = backfill_runs(conn, shown.backfill_id)
    assert len(runs) == 3
    finish_run(conn, runs[0]["id"])
    cancelled = backfills.cancel(conn, shown.backfill_id, actor="ana", now=NOW)
    assert (cancelled.cancelled, cancelled.asked_to_stop) == (2, 0)
    trigger.run_once(conn, now=NOW + timedelta(seconds=5))
    statuses = [r["status"] for r in backfill_runs(conn, shown.backfill_id)]
    assert statuses == ["completed", "cancelled", "cancelled"]
    assert len(run_fire_times(conn, sid)) == 3
    [row] = backfills.listed(conn, schedule_id=sid)
    assert (row["status"], row["done"], row["stopped"], row["not_run"]) == ("cancelled", 1, 2, 7)
    with pytest.raises(UsageError, match="already cancelled"):
        backfills.cancel(conn, shown.backfill_id, actor="ana", now=NOW)


def test_the_ledger_keeps_a_running_backfills_fires_past_their_retention(conn: Conn) -> None:
    sid = add(conn, "hourly", cron="0 * * * *", timezone="UTC", now=NOW)
    shown = backfills.start(conn, "hourly", start=utc("2026-06-01T00:00"),
                            end=utc("2026-06-01T03:00"), concurrency=2, actor="ana",
                            now=NOW)  # fmt: skip
    trigger = Trigger(settings())
    trigger.run_once(conn, now=NOW)
    ninety_days_ago = NOW - timedelta(days=90)
    schedules.prune_fires(conn, ninety_days_ago, None)
    assert len(ledger(conn, sid)) == 2  # still counted against its cap of 2
    trigger.run_once(conn, now=NOW)
    assert len(backfill_runs(conn, shown.backfill_id)) == 2
    backfills.cancel(conn, shown.backfill_id, actor="ana", now=NOW)
    schedules.prune_fires(conn, ninety_days_ago, None)
    assert ledger(conn, sid) == []


def test_a_daily_0230_backfill_over_fall_back_runs_the_repeated_time_once(conn: Conn) -> None:
    add(conn, "nightly", cron="30 2 * * *", timezone="Europe/Berlin", now=NOW)
    start, end = berlin("2026-10-24T00:00"), berlin("2026-10-26T23:00")
    shown = backfills.start(conn, "nightly", start=start, end=end, dry_run=True, actor="ana",
                            now=NOW)  # fmt: skip
    rule = Recurrence.from_cron("30 2 * * *", "Europe/Berlin")
    assert [f.at for f in shown.fires] == [f.at for f in fires_between(rule, start, end)]
    # 02:30 happens twice on Sunday 25 October: it runs at the first, 02:30 CEST
    assert [f.at for f in shown.fires] == [
        utc("2026-10-24T00:30"), utc("2026-10-25T00:30"), utc("2026-10-26T01:30")
    ]  # fmt: skip
    assert [note for _, note in shown.dst] == [
        "02:30 happens twice on 25 Oct (the clocks go back); this is the first time"
    ]


def test_a_backfill_whose_rule_broke_waits_and_the_trigger_goes_on(conn: Conn) -> None:
    sid = add(conn, "hourly", cron="0 * * * *", timezone="UTC", now=NOW)
    shown = backfills.start(conn, "hourly", start=utc("2026-06-01T00:00"),
                            end=utc("2026-06-01T03:00"), actor="ana", now=NOW)  # fmt: skip
    # a zone gone from tzdata, written around validation
    conn.execute("UPDATE schedules SET timezone = 'Mars/Olympus' WHERE id = %s", (sid,))
    assert Trigger(settings()).run_once(conn, now=NOW).leader
    assert backfill_runs(conn, shown.backfill_id) == []
    (row,) = backfills.listed(conn, backfill_id=shown.backfill_id)
    assert row["status"] == "running"
