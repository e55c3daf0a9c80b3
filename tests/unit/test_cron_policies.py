"""The trigger's pure decisions (`app.scheduling.fire_decisions.plan_fires`) with an injected
clock: catch-up, overlap, pause, spread, and the bounds that keep a long outage cheap."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from app.scheduling import cron
from app.scheduling import fire_decisions as fires
from app.scheduling.cron import Fire, Recurrence
from app.scheduling.fire_decisions import (
    DueSchedule,
    FireOutcome,
    OverlapPolicy,
    Plan,
    PlanLimits,
    plan_fires,
    spread_offset,
)
from tests.helpers.waits import utc

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
    assert plan.runs_wanted[0].coalesced_count == 0
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
    assert {e.coalesced_count for e in plan.entries} == {0}


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


def test_a_year_long_outage_on_every_minute_is_bounded_in_rows_and_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walked = 0
    real_fires_after = cron.fires_after

    def counting(rule: Recurrence, after: datetime) -> Iterator[Fire]:
        nonlocal walked
        for fire in real_fires_after(rule, after):
            walked += 1
            yield fire

    monkeypatch.setattr(cron, "fires_after", counting)
    schedule = due(MINUTELY, next_fire="2025-05-01T00:00", catchup=True)
    limits = PlanLimits(catchup_max=1000, ledger_rows=100, count_cap=10_000)
    plan = plan_fires(schedule, utc("2026-05-01T00:00"), limits=limits)
    assert len(plan.runs_wanted) == 1000
    assert [e.fire.at for e in plan.runs_wanted][-1] == utc("2026-05-01T00:00")
    missed = [e for e in plan.entries if e.outcome is FireOutcome.MISSED]
    assert len(missed) == 100  # listed; the rest are counted on the oldest listed row
    assert [e.fire.at - missed[0].fire.at for e in missed] == [
        timedelta(minutes=i) for i in range(100)
    ]
    assert missed[-1].fire.at == plan.runs_wanted[0].fire.at - timedelta(minutes=1)
    assert missed[0].detail is not None and "10000+ earlier fires since" in missed[0].detail
    # bounded by the limits, not by the 525,600 missed fires
    assert walked <= 4 * (1000 + 100) + 10_000 + 100


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
    assert plan.entries[-1].coalesced_count == 0  # nothing older was folded into it


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


# ---- gaps a mutation run found: behaviour users rely on ---------------------------------


def test_a_paused_schedule_with_one_due_fire_records_it_as_paused() -> None:
    plan = plan_fires(due(active=False), utc("2026-05-01T10:00:05"))
    assert outcomes(plan) == [("01 10:00", "paused")]
    assert plan.runs_wanted == [] and not plan.resume
    assert plan.next_fire_time == utc("2026-05-01T11:00")


def test_a_single_fire_older_than_the_catchup_window_is_missed() -> None:
    schedule = due(catchup_window=timedelta(minutes=20))
    plan = plan_fires(schedule, utc("2026-05-01T10:30"))
    assert outcomes(plan) == [("01 10:00", "missed")]
    assert plan.entries[0].detail == "older than the catch-up window of 1200s"
    assert plan.next_fire_time == utc("2026-05-01T11:00")
    # exactly as old as the window: still inside it
    on_the_edge = plan_fires(schedule, utc("2026-05-01T10:20"))
    assert outcomes(on_the_edge) == [("01 10:00", "enqueued")]


def test_a_catchup_window_edge_on_a_fire_keeps_that_fire() -> None:
    schedule = due(catchup=True, catchup_window=timedelta(hours=2))
    plan = plan_fires(schedule, utc("2026-05-01T13:00"))
    assert outcomes(plan) == [
        ("01 10:00", "missed"),
        ("01 11:00", "enqueued"),
        ("01 12:00", "enqueued"),
        ("01 13:00", "enqueued"),
    ]


def test_a_pause_ending_in_the_future_keeps_the_schedule_paused() -> None:
    schedule = due(active=False, paused_until=utc("2026-05-01T14:30"))
    plan = plan_fires(schedule, utc("2026-05-01T12:10"))
    assert outcomes(plan) == [
        ("01 10:00", "paused"),
        ("01 11:00", "paused"),
        ("01 12:00", "paused"),
    ]
    assert not plan.resume
    assert plan.next_fire_time == utc("2026-05-01T13:00")


def test_a_pause_ending_on_a_fire_lets_that_fire_run() -> None:
    schedule = due(active=False, paused_until=utc("2026-05-01T12:00"))
    plan = plan_fires(schedule, utc("2026-05-01T12:10"))
    assert outcomes(plan) == [
        ("01 10:00", "paused"),
        ("01 11:00", "paused"),
        ("01 12:00", "enqueued"),
    ]
    assert plan.resume
    ended_now = plan_fires(schedule, utc("2026-05-01T12:00"))
    assert ended_now.resume and outcomes(ended_now)[-1] == ("01 12:00", "enqueued")


def test_queue_overlap_with_a_catchup_backlog_queues_the_newest_fire() -> None:
    schedule = due(catchup=True, overlap=OverlapPolicy.QUEUE)
    plan = plan_fires(schedule, utc("2026-05-01T12:30"), [7])
    assert outcomes(plan) == [
        ("01 10:00", "skipped_overlap"),
        ("01 11:00", "skipped_overlap"),
        ("01 12:00", "queued"),
    ]
    assert plan.entries[-1].detail == "queued behind run 7"
    assert plan.runs_wanted == []


def test_cancel_overlap_with_a_catchup_backlog_enqueues_all_and_cancels_once() -> None:
    schedule = due(catchup=True, overlap=OverlapPolicy.CANCEL, spread=timedelta(0))
    plan = plan_fires(schedule, utc("2026-05-01T11:30"), [7])
    assert outcomes(plan) == [("01 10:00", "enqueued"), ("01 11:00", "enqueued")]
    assert plan.cancel_run_ids == [7]
    assert all(e.detail == "cancelled the previous run 7" for e in plan.entries)


def test_an_interval_schedule_at_its_start_fires_once() -> None:
    start = utc("2026-05-01T10:00")
    schedule = DueSchedule(
        id=SCHEDULE, rule=Recurrence.every(60, start), next_fire_time=start, spread=timedelta(0)
    )
    plan = plan_fires(schedule, start)
    assert [(e.fire.at, e.outcome.value) for e in plan.entries] == [(start, "enqueued")]
    assert plan.next_fire_time == start + timedelta(minutes=1)


def test_a_fire_due_exactly_at_now_behind_an_older_one_coalesces_it() -> None:
    plan = plan_fires(due(), utc("2026-05-01T11:00"))
    assert outcomes(plan) == [("01 10:00", "coalesced"), ("01 11:00", "enqueued")]
    assert plan.entries[-1].coalesced_count == 1


def test_a_cursor_between_fires_enqueues_nothing_before_the_next_fire() -> None:
    # the rule changed since next_fire_time was computed: 10:00 is no longer a fire
    schedule = due(Recurrence.from_cron("30 * * * *", "UTC"), "2026-05-01T10:00")
    plan = plan_fires(schedule, utc("2026-05-01T10:10"))
    assert plan.entries == []
    assert plan.next_fire_time == utc("2026-05-01T10:30")


def test_the_usual_tick_does_not_search_a_backlog(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_backlog_search(*args: object) -> list[Fire]:
        raise AssertionError("one due fire needs no backlog search")

    monkeypatch.setattr(fires, "latest_fires", no_backlog_search)
    plan = plan_fires(due(), utc("2026-05-01T10:00:02"))
    assert outcomes(plan) == [("01 10:00", "enqueued")]


def test_default_limits_backfill_1000_fires_and_list_100_missed() -> None:
    schedule = due(MINUTELY, next_fire="2026-05-01T00:00", catchup=True)
    plan = plan_fires(schedule, utc("2026-05-01T20:00"))  # 1201 fires due
    assert len(plan.runs_wanted) == 1000
    missed = [e for e in plan.entries if e.outcome is FireOutcome.MISSED]
    assert len(missed) == 100
    assert missed[0].detail is not None
    assert missed[0].detail.endswith("and 101 earlier fires since 2026-05-01 00:00 UTC")


def test_the_oldest_listed_row_keeps_its_own_dst_note_and_counts_the_rest() -> None:
    rule = Recurrence.from_cron("30 2 * * *", "America/New_York")
    schedule = due(rule, "2026-03-06T07:30", active=False)
    plan = plan_fires(schedule, utc("2026-03-09T12:00"), limits=PlanLimits(ledger_rows=2))
    assert [e.fire.local.day for e in plan.entries] == [8, 9]
    assert plan.entries[0].detail == (
        "local time skipped by DST; fired when the clocks jumped; "
        "and 2 earlier fires since 2026-03-06 07:30 UTC"
    )
    assert plan.entries[1].detail is None


def test_queue_overlap_with_a_fire_already_queued_notes_it_on_the_newest() -> None:
    schedule = due(catchup=True, overlap=OverlapPolicy.QUEUE, has_queued_fire=True)
    plan = plan_fires(schedule, utc("2026-05-01T11:30"), [7])
    assert outcomes(plan) == [("01 10:00", "skipped_overlap"), ("01 11:00", "skipped_overlap")]
    assert plan.entries[0].detail == "run 7 of this schedule was still pending or running"
    assert plan.entries[1].detail is not None and "already queued" in plan.entries[1].detail


def test_spread_offsets_use_every_millisecond_of_the_window() -> None:
    offsets = {spread_offset(uuid.UUID(int=i), timedelta(milliseconds=2)) for i in range(1, 60)}
    assert offsets == {timedelta(0), timedelta(milliseconds=1)}
