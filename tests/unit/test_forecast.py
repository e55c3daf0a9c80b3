"""The load forecast and week calendar counts (`app.scheduling.forecast`) on known rules, DST days
included, with fixed instants."""

from __future__ import annotations

from datetime import timedelta

from app.scheduling import forecast
from app.scheduling.cron import DstRepeated, Recurrence, fires_between
from tests.helpers.waits import utc

DAY = timedelta(days=1)


def minutes_with_fires(counts: list[int]) -> dict[int, int]:
    return {m: c for m, c in enumerate(counts) if c}


def test_hourly_and_quarter_hourly_crons_count_their_fires_in_24_hours() -> None:
    start = utc("2026-05-01T00:00")
    hourly = Recurrence.from_cron("0 * * * *", "UTC")
    quarter = Recurrence.from_cron("*/15 * * * *", "UTC")
    counts = forecast.minute_counts([(hourly, 3), (quarter, 1)], start)
    assert sum(counts) == 3 * 24 + 96
    assert counts[0] == 4 and counts[60] == 4 and counts[15] == 1 and counts[16] == 0
    assert forecast.busiest(counts, start, 2) == [(start, 4), (start + timedelta(hours=1), 4)]


def test_a_fall_back_day_counts_a_fixed_time_once_or_twice_as_the_schedule_asks() -> None:
    # New York falls back on 1 Nov 2026: 01:30 happens twice (05:30 and 06:30 UTC).
    start = utc("2026-11-01T04:00")  # local midnight, EDT
    once = Recurrence.from_cron("30 1 * * *", "America/New_York")
    both = Recurrence.from_cron("30 1 * * *", "America/New_York", dst_repeated=DstRepeated.BOTH)
    nine = Recurrence.from_cron("0 9 * * *", "America/New_York")  # 14:00 UTC after the change
    assert minutes_with_fires(forecast.minute_counts([(once, 1)], start)) == {90: 1}
    assert minutes_with_fires(forecast.minute_counts([(both, 1)], start)) == {90: 1, 150: 1}
    assert minutes_with_fires(forecast.minute_counts([(nine, 1)], start)) == {600: 1}
    # a wildcard hour follows elapsed time: 24 fires in 24 hours, the repeated hour too
    half_past = Recurrence.from_cron("30 * * * *", "America/New_York")
    assert sum(forecast.minute_counts([(half_past, 1)], start)) == 24


def test_a_spring_forward_day_fires_a_skipped_time_when_the_clocks_jump() -> None:
    start = utc("2026-03-08T05:00")  # local midnight in New York, EST
    skipped = Recurrence.from_cron("30 2 * * *", "America/New_York")  # 02:30 does not exist
    assert minutes_with_fires(forecast.minute_counts([(skipped, 1)], start)) == {120: 1}


def test_intervals_count_every_fire_and_those_landing_alike_are_computed_once() -> None:
    start = utc("2026-05-01T00:00")
    every_20s = Recurrence.every(20, utc("2026-04-30T23:59:50"))
    counts = forecast.minute_counts(forecast.grouped([every_20s], start, start + DAY), start)
    assert counts[0] == 3 and counts[1439] == 3
    assert sum(counts) == sum(1 for _ in fires_between(every_20s, start, start + DAY))
    # anchors a whole number of intervals apart fire on the same seconds of the window
    hourly_a = Recurrence.every(3600, utc("2026-04-01T00:30"))
    hourly_b = Recurrence.every(3600, utc("2026-04-20T05:30"))
    ending = Recurrence.every(3600, utc("2026-04-01T00:30"), end=utc("2026-05-01T02:30"))
    starting_later = Recurrence.every(3600, utc("2026-05-01T12:30"))
    groups = forecast.grouped([hourly_a, hourly_b, ending, starting_later], start, start + DAY)
    assert sorted((k.count, n) for k, n in groups if isinstance(k, forecast.Steps)) == [
        (3, 1), (12, 1), (24, 2),
    ]  # fmt: skip
    counts = forecast.minute_counts(groups, start)
    assert counts[30] == 3 and counts[150] == 3 and counts[210] == 2 and counts[750] == 3


def test_schedules_that_share_a_rule_are_computed_once() -> None:
    start = utc("2026-05-01T00:00")
    old = Recurrence.from_cron("0 9 * * *", "UTC", start=utc("2020-01-01T00:00"))
    new = Recurrence.from_cron("0 9 * * *", "UTC")
    later = Recurrence.from_cron("0 9 * * *", "UTC", start=utc("2026-05-01T10:00"))
    groups = forecast.grouped([old, new, later], start, start + DAY)
    assert sorted(n for _, n in groups) == [1, 2]  # a start still ahead matters
    assert sum(forecast.minute_counts(groups, start)) == 2


def test_the_edited_schedule_is_counted_apart_within_the_window() -> None:
    start = utc("2026-05-01T00:00")
    fires = [start - timedelta(minutes=1), start, start + timedelta(minutes=90), start + DAY]
    assert minutes_with_fires(forecast.minutes_of(fires, start)) == {0: 1, 90: 1}


def test_the_week_shows_a_frequent_schedule_as_a_band_and_others_by_time() -> None:
    monday = utc("2026-11-30T00:00")
    bounds = [(monday + d * DAY, monday + (d + 1) * DAY) for d in range(7)]
    five = forecast.days_of(Recurrence.from_cron("*/5 * * * *", "UTC"), bounds)
    assert [d.band for d in five] == [288] * 7 and five[0].times == ()
    weekdays = forecast.days_of(Recurrence.from_cron("0 9 * * 1-5", "UTC"), bounds)
    assert [len(d.times) for d in weekdays] == [1, 1, 1, 1, 1, 0, 0]
    assert weekdays[0].times == (utc("2026-11-30T09:00"),) and weekdays[0].band == 0
