"""Calendar membership (`app.scheduling.exclusions`): holidays are whole local days in the
schedule's zone, blackout windows are [start, end), and a plan's runs become `excluded` fires."""

from __future__ import annotations

import uuid
from datetime import timedelta

from app.scheduling.cron import Fire, Recurrence
from app.scheduling.exclusions import Blackout, Calendar, exclude, excluded_reason, holiday_on
from app.scheduling.fire_decisions import DueSchedule, FireOutcome, OverlapPolicy, plan_fires
from tests.helpers.waits import utc

NZ = Calendar("NZ", country="NZ")


def test_a_holiday_is_the_local_day_in_a_zone_ahead_of_utc() -> None:
    # 23:30 UTC on 24 Dec is 12:30 on Christmas Day in Auckland (UTC+13 in summer)
    instant = utc("2026-12-24T23:30")
    assert excluded_reason(NZ, instant, "Pacific/Auckland") == "public holiday in NZ: Christmas Day"
    assert excluded_reason(NZ, instant, "UTC") is None  # still 24 Dec in UTC
    # 11:00 UTC on 25 Dec is already 26 Dec in Auckland: Boxing Day, another holiday
    assert "Boxing Day" in str(excluded_reason(NZ, utc("2026-12-25T11:00"), "Pacific/Auckland"))
    assert excluded_reason(NZ, utc("2026-12-28T11:00"), "Pacific/Auckland") is None  # 29 Dec


def test_a_subdivision_adds_its_own_holidays() -> None:
    day = utc("2026-01-06T10:00").date()  # Epiphany: Bavaria, not Berlin
    assert holiday_on(Calendar("BY", country="DE", subdivision="BY"), day) == "Epiphany"
    assert holiday_on(Calendar("BE", country="DE", subdivision="BE"), day) is None


def test_a_blackout_window_includes_its_start_and_not_its_end() -> None:
    window = Blackout("quarter close", utc("2026-12-30T00:00"), utc("2027-01-02T00:00"))
    cal = Calendar("finance", blackouts=(window,))
    assert excluded_reason(cal, utc("2026-12-29T23:59"), "UTC") is None
    assert excluded_reason(cal, utc("2026-12-30T00:00"), "UTC") == (
        "in the blackout window 'quarter close'"
    )
    assert excluded_reason(cal, utc("2027-01-02T00:00"), "UTC") is None
    assert excluded_reason(None, utc("2026-12-30T00:00"), "UTC") is None


def test_a_plan_records_its_excluded_fire_and_cancels_no_run_for_it() -> None:
    rule = Recurrence.from_cron("0 9 * * *", "Pacific/Auckland")
    schedule = DueSchedule(
        id=uuid.uuid4(), rule=rule, next_fire_time=utc("2026-12-24T20:00"),
        overlap=OverlapPolicy.CANCEL,
    )  # fmt: skip
    plan = plan_fires(schedule, utc("2026-12-24T20:00:05"), active_run_ids=[7])
    assert plan.cancel_run_ids == [7]
    excluded = exclude(plan, NZ, rule.zone)
    [entry] = excluded.entries
    assert entry.outcome is FireOutcome.EXCLUDED and entry.run_at is None
    assert entry.detail == "public holiday in NZ: Christmas Day (calendar 'NZ')"
    assert excluded.cancel_run_ids == [] and excluded.runs_wanted == []
    assert excluded.next_fire_time == plan.next_fire_time


def test_a_plan_outside_the_calendar_is_returned_as_it_was() -> None:
    rule = Recurrence.from_cron("0 9 * * *", "UTC")
    schedule = DueSchedule(id=uuid.uuid4(), rule=rule,
                           next_fire_time=utc("2026-12-21T09:00"))  # fmt: skip
    plan = plan_fires(schedule, utc("2026-12-21T09:00") + timedelta(seconds=1))
    assert exclude(plan, NZ, rule.zone) is plan
    assert [e.fire for e in plan.entries] == [
        Fire(utc("2026-12-21T09:00"), utc("2026-12-21T09:00").replace(tzinfo=None))
    ]


def test_fires_coalesced_into_an_excluded_fire_say_that_nothing_ran() -> None:
    rule = Recurrence.from_cron("0 9 * * *", "Pacific/Auckland")  # 20:00 UTC the day before
    schedule = DueSchedule(id=uuid.uuid4(), rule=rule, next_fire_time=utc("2026-12-22T20:00"))
    # the trigger was down for three days; the newest due fire is on Christmas Day
    plan = plan_fires(schedule, utc("2026-12-24T20:00:05"))
    assert [e.outcome for e in plan.entries] == [FireOutcome.COALESCED] * 2 + [FireOutcome.ENQUEUED]
    excluded = exclude(plan, NZ, rule.zone)
    assert [e.outcome for e in excluded.entries] == [FireOutcome.COALESCED] * 2 + [
        FireOutcome.EXCLUDED
    ]
    assert all(e.covered_by is None for e in excluded.entries)
    assert str(excluded.entries[0].detail).endswith("that fire was excluded, so none ran")
