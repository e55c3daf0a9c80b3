"""The trigger's pure decisions (`app.fires.plan_fires`) with an injected clock: catch-up,
overlap, pause, spread, and the bounds that keep a long outage cheap."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest

from app.cron import Recurrence
from app.fires import (
    DueSchedule,
    FireOutcome,
    OverlapPolicy,
    Plan,
    PlanLimits,
    plan_fires,
    spread_offset,
)
from tests.waits import utc

SCHEDULE = uuid.UUID("00000000-0000-4000-8000-000000000001")
HOURLY = Recurrence.from_cron("0 * * * *", "UTC")
MINUTELY = Recurrence.from_cron("* * * * *", "UTC")


def due(
    rule: Recurrence = HOURLY, next_fire: str = "2026-05-01T10:00", **kw: object
) -> DueSchedule:
    return DueSchedule(id=SCHEDULE, rule=rule, next_fire_time=utc(next_fire), **kw)  # type: ignore[arg-type]


def outcomes(plan: Plan) -> list[tuple[str, str]]:
    return [(f"{e.fire.at:%d %H:%M}", e.outcome.value) for e in plan.entries]


def test_one_due_fire_becomes_one_run_and_the_next_fire_moves_on() -> None:
    plan = plan_fires(due(spread=timedelta(0)), utc("2026-05-01T10:00:02"))
    assert outcomes(plan) == [("01 10:00", "enqueued")]
    assert plan.runs_wanted[0].run_at == utc("2026-05-01T10:00")
    assert plan.next_fire_time == utc("2026-05-01T11:00")
    assert plan.cancel_run_ids == []


def test_a_fire_at_exactly_now_is_due() -> None:
    plan = plan_fires(due(), utc("2026-05-01T10:00"))
    assert outcomes(plan) == [("01 10:00", "enqueued")]


def test_catchup_latest_coalesces_missed_fires_into_the_newest() -> None:
    plan = plan_fires(due(), utc("2026-05-01T13:30"))
    assert outcomes(plan) == [
        ("01 10:00", "coalesced"),
        ("01 11:00", "coalesced"),
        ("01 12:00", "coalesced"),
        ("01 13:00", "enqueued"),
    ]
    newest = plan.entries[-1]
    assert newest.coalesced_count == 3
    assert {e.covered_by for e in plan.entries[:-1]} == {utc("2026-05-01T13:00")}
    assert plan.next_fire_time == utc("2026-05-01T14:00")


def test_catchup_all_backfills_every_missed_fire_oldest_first() -> None:
    plan = plan_fires(due(catchup=True, spread=timedelta(0)), utc("2026-05-01T13:30"))
    assert outcomes(plan) == [
        ("01 10:00", "enqueued"),
        ("01 11:00", "enqueued"),
        ("01 12:00", "enqueued"),
        ("01 13:00", "enqueued"),
    ]
    assert [e.run_at for e in plan.runs_wanted] == [e.fire.at for e in plan.entries]


def test_catchup_at_most_n_backfills_the_newest_n_and_misses_the_rest() -> None:
    plan = plan_fires(due(catchup=True, catchup_limit=2), utc("2026-05-01T13:30"))
    assert outcomes(plan) == [
        ("01 10:00", "missed"),
        ("01 11:00", "missed"),
        ("01 12:00", "enqueued"),
        ("01 13:00", "enqueued"),
    ]
    assert plan.entries[0].detail == "beyond the catch-up limit of 2 fires"


def test_catchup_window_misses_fires_older_than_it() -> None:
    schedule = due(catchup=True, catchup_window=timedelta(minutes=150))
    plan = plan_fires(schedule, utc("2026-05-01T13:30"))
    assert outcomes(plan) == [
        ("01 10:00", "missed"),
        ("01 11:00", "enqueued"),
        ("01 12:00", "enqueued"),
        ("01 13:00", "enqueued"),
    ]
    assert plan.entries[0].detail == "older than the catch-up window of 9000s"


def test_catchup_latest_outside_the_window_runs_nothing() -> None:
    schedule = due(catchup_window=timedelta(minutes=20))
    plan = plan_fires(schedule, utc("2026-05-01T13:30"))
    assert {e.outcome for e in plan.entries} == {FireOutcome.MISSED}
    assert plan.runs_wanted == []
    assert plan.next_fire_time == utc("2026-05-01T14:00")


def test_the_global_catchup_bound_caps_all() -> None:
    schedule = due(MINUTELY, catchup=True)
    plan = plan_fires(schedule, utc("2026-05-01T12:00"), limits=PlanLimits(catchup_max=30))
    assert len(plan.runs_wanted) == 30
    assert plan.runs_wanted[0].fire.at == utc("2026-05-01T11:31")


def test_a_year_long_outage_on_every_minute_is_bounded_in_rows_and_time() -> None:
    schedule = due(MINUTELY, next_fire="2025-05-01T00:00", catchup=True)
    limits = PlanLimits(catchup_max=1000, ledger_rows=100, count_cap=100_000)
    started = time.perf_counter()
    plan = plan_fires(schedule, utc("2026-05-01T00:00"), limits=limits)
    elapsed = time.perf_counter() - started
    assert len(plan.runs_wanted) == 1000
    missed = [e for e in plan.entries if e.outcome is FireOutcome.MISSED]
    assert len(missed) == 100  # listed; the rest are counted on the oldest listed row
    assert missed[0].detail is not None and "100000+ earlier fires since" in missed[0].detail
    assert elapsed < 10  # bounded by count_cap, not by the 525,600 missed fires


def test_overlap_skip_records_the_fire_and_creates_no_run() -> None:
    plan = plan_fires(due(), utc("2026-05-01T10:00:01"), active_run_ids=[7])
    assert outcomes(plan) == [("01 10:00", "skipped_overlap")]
    assert plan.entries[0].detail == "run 7 of this schedule was still pending or running"
    assert plan.next_fire_time == utc("2026-05-01T11:00")


def test_overlap_allow_ignores_active_runs() -> None:
    plan = plan_fires(due(overlap=OverlapPolicy.ALLOW), utc("2026-05-01T10:00:01"), [7])
    assert outcomes(plan) == [("01 10:00", "enqueued")]


def test_overlap_queue_keeps_one_fire_waiting() -> None:
    schedule = due(overlap=OverlapPolicy.QUEUE)
    plan = plan_fires(schedule, utc("2026-05-01T10:00:01"), [7])
    assert outcomes(plan) == [("01 10:00", "queued")]
    again = plan_fires(
        due(overlap=OverlapPolicy.QUEUE, has_queued_fire=True), utc("2026-05-01T10:00:01"), [7]
    )
    assert outcomes(again) == [("01 10:00", "skipped_overlap")]
    assert again.entries[0].detail is not None and "already queued" in again.entries[0].detail


def test_overlap_cancel_cancels_the_previous_run_then_enqueues() -> None:
    plan = plan_fires(due(overlap=OverlapPolicy.CANCEL), utc("2026-05-01T10:00:01"), [7, 8])
    assert outcomes(plan) == [("01 10:00", "enqueued")]
    assert plan.cancel_run_ids == [7, 8]
    assert plan.entries[0].detail == "cancelled the previous run 7, 8"


def test_overlap_with_catchup_is_one_decision_for_the_whole_backlog() -> None:
    skipped = plan_fires(due(catchup=True), utc("2026-05-01T12:30"), [7])
    assert {e.outcome for e in skipped.entries} == {FireOutcome.SKIPPED_OVERLAP}
    backfilled = plan_fires(due(catchup=True), utc("2026-05-01T12:30"), [])
    assert {e.outcome for e in backfilled.entries} == {FireOutcome.ENQUEUED}


def test_paused_schedule_records_its_fires_as_paused() -> None:
    schedule = due(active=False, paused_note="holiday")
    plan = plan_fires(schedule, utc("2026-05-01T12:10"))
    assert outcomes(plan) == [
        ("01 10:00", "paused"),
        ("01 11:00", "paused"),
        ("01 12:00", "paused"),
    ]
    assert plan.entries[0].detail == "schedule paused: holiday"
    assert not plan.resume
    assert plan.next_fire_time == utc("2026-05-01T13:00")


def test_an_expired_pause_resumes_and_fires_after_it() -> None:
    schedule = due(active=False, paused_until=utc("2026-05-01T11:30"))
    plan = plan_fires(schedule, utc("2026-05-01T12:10"))
    assert outcomes(plan) == [
        ("01 10:00", "paused"),
        ("01 11:00", "paused"),
        ("01 12:00", "enqueued"),
    ]
    assert plan.resume


def test_a_schedule_that_ended_has_no_next_fire() -> None:
    rule = Recurrence.from_cron("0 * * * *", "UTC", end=utc("2026-05-01T10:00"))
    plan = plan_fires(due(rule), utc("2026-05-01T10:00:05"))
    assert outcomes(plan) == [("01 10:00", "enqueued")]
    assert plan.next_fire_time is None


def test_dst_notes_reach_the_ledger_detail() -> None:
    rule = Recurrence.from_cron("30 2 * * *", "America/New_York")
    plan = plan_fires(due(rule, next_fire="2026-03-08T07:00"), utc("2026-03-08T07:00:01"))
    assert plan.entries[0].fire.local.hour == 2
    assert plan.entries[0].detail is not None and "skipped by DST" in plan.entries[0].detail


def test_spread_is_stable_per_schedule_and_within_the_window() -> None:
    window = timedelta(seconds=60)
    ids = [uuid.UUID(int=i * 7919 + 1) for i in range(2000)]
    offsets = [spread_offset(i, window) for i in ids]
    assert offsets == [spread_offset(i, window) for i in ids]
    assert all(timedelta(0) <= o < window for o in offsets)
    seconds = {int(o.total_seconds()) for o in offsets}
    assert len(seconds) == 60  # 2,000 schedules at :00 do not land in one second
    assert spread_offset(ids[0], timedelta(0)) == timedelta(0)


def test_run_at_is_fire_time_plus_the_schedule_offset() -> None:
    plan = plan_fires(due(), utc("2026-05-01T10:00:01"))
    assert plan.runs_wanted[0].run_at == utc("2026-05-01T10:00") + spread_offset(
        SCHEDULE, timedelta(seconds=60)
    )


def test_spread_never_reaches_the_next_fire() -> None:
    every_10s = Recurrence.every(10, utc("2026-05-01T10:00"))
    for k in range(50):
        schedule = DueSchedule(
            id=uuid.UUID(int=k + 1),
            rule=every_10s,
            next_fire_time=utc("2026-05-01T10:00"),
            spread=timedelta(seconds=60),
        )
        [run] = plan_fires(schedule, utc("2026-05-01T10:00:01")).runs_wanted
        assert run.run_at is not None
        assert timedelta(0) <= run.run_at - run.fire.at < timedelta(seconds=10)


@pytest.mark.parametrize("now", ["2026-05-01T09:59:59", "2026-05-01T08:00"])
def test_nothing_is_due_before_the_next_fire_even_when_the_clock_went_back(now: str) -> None:
    plan = plan_fires(due(), utc(now))
    assert plan.entries == []
    assert plan.next_fire_time == utc("2026-05-01T10:00")  # never moves back
