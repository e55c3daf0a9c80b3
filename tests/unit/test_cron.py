"""Cron and interval math with fixed instants: DST in New York and London, leap days,
month ends, bounds, and the searches the trigger uses after downtime."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from app.core import limits
from app.scheduling import cron
from app.scheduling.cron import (
    EPSILON,
    DstRepeated,
    DstSkipped,
    Fire,
    Recurrence,
    count_fires,
    fires_after,
    fires_between,
    latest_fires,
    next_fire,
)
from app.scheduling.cron_expressions import RecurrenceError, parse_cron
from tests.helpers.waits import utc

NEW_YORK = "America/New_York"
LONDON = "Europe/London"
# 2026: US clocks spring forward on 8 March and fall back on 1 November; UK on 29 March and
# 25 October.
NY_SPRING, NY_FALL = "2026-03-08", "2026-11-01"
UK_SPRING, UK_FALL = "2026-03-29", "2026-10-25"


def wall(text: str) -> datetime:
    return datetime.fromisoformat(text)


def fires_on(rule: Recurrence, day: str) -> list[str]:
    """UTC times (MM-DD HH:MM) of the fires from the day before `day` to the day after."""
    start = utc(f"{day}T00:00") - timedelta(days=1)
    return [f"{f.at:%m-%d %H:%M}" for f in fires_between(rule, start, start + timedelta(days=3))]


def local_fires(rule: Recurrence, start: str, end: str) -> list[str]:
    zone = rule.zone
    return [
        f.at.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
        for f in fires_between(rule, utc(start), utc(end))
    ]


# ---- parsing and validation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "fields"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@HOURLY", "0 * * * *"),
    ],
)
def test_aliases_mean_their_five_fields(alias: str, fields: str) -> None:
    assert parse_cron(alias) == parse_cron(fields)


def test_names_ranges_steps_and_sunday_as_seven() -> None:
    cron = parse_cron("*/20 9-17/4 * jan,jul mon-fri")
    assert cron.minutes == (0, 20, 40)
    assert cron.hours == (9, 13, 17)
    assert cron.months == {1, 7}
    assert cron.weekdays == {1, 2, 3, 4, 5}
    assert parse_cron("0 0 * * 7").weekdays == {0}


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("61 * * * *", "is not a valid cron expression"),
        ("* * * *", "must have 5 fields"),
        ("0 0 * * * 5", "must have 5 fields"),
        ("@reboot", "unknown cron alias"),
        ("0 0 * * 5#2", "unsupported day-of-week"),
        ("0 0 15W * *", "unsupported day-of-month"),
        ("0 0 * * L5", "the day-of-week field has 'L5'"),
        ("H * * * *", "unsupported minute"),
        ("", "must have 5 fields"),
    ],
)
def test_bad_cron_is_one_clear_sentence(expression: str, message: str) -> None:
    with pytest.raises(RecurrenceError, match=message):
        parse_cron(expression)


def test_unknown_zone_is_refused_not_utc() -> None:
    with pytest.raises(RecurrenceError, match="unknown time zone 'Europe/Atlantis'"):
        Recurrence.from_cron("0 0 * * *", "Europe/Atlantis")


def test_interval_must_be_positive() -> None:
    with pytest.raises(RecurrenceError, match="more than 0 seconds"):
        Recurrence.every(0, utc("2026-01-01T00:00"))


def test_hour_field_decides_fixed_time_or_elapsed() -> None:
    assert parse_cron("30 2 * * *").fixed_hour
    assert parse_cron("0 1,13 * * *").fixed_hour
    assert not parse_cron("*/15 * * * *").fixed_hour
    assert not parse_cron("@hourly").fixed_hour
    assert not parse_cron("0 */2 * * *").fixed_hour


# ---- DST: America/New_York --------------------------------------------------------------


def test_new_york_0230_on_spring_forward_fires_once_when_the_clocks_jump() -> None:
    rule = Recurrence.from_cron("30 2 * * *", NEW_YORK)
    assert local_fires(rule, "2026-03-07T00:00", "2026-03-10T00:00") == [
        "2026-03-07 02:30 EST",
        "2026-03-08 03:00 EDT",  # 02:30 does not exist: the next valid instant
        "2026-03-09 02:30 EDT",
    ]
    shifted = next_fire(rule, utc("2026-03-07T12:00"))
    assert shifted is not None
    assert shifted.local == wall("2026-03-08T02:30")
    assert shifted.note is not None and "skipped by DST" in shifted.note


def test_new_york_0230_with_skip_policy_does_not_fire_that_day() -> None:
    rule = Recurrence.from_cron("30 2 * * *", NEW_YORK, dst_skipped=DstSkipped.SKIP)
    assert local_fires(rule, "2026-03-07T00:00", "2026-03-10T00:00") == [
        "2026-03-07 02:30 EST",
        "2026-03-09 02:30 EDT",
    ]


def test_new_york_0230_on_fall_back_is_not_repeated() -> None:
    # New York repeats 01:00-02:00; 02:30 happens once.
    rule = Recurrence.from_cron("30 2 * * *", NEW_YORK)
    assert local_fires(rule, "2026-10-31T00:00", "2026-11-03T00:00") == [
        "2026-10-31 02:30 EDT",
        "2026-11-01 02:30 EST",
        "2026-11-02 02:30 EST",
    ]


def test_new_york_0100_on_fall_back_fires_at_the_first_occurrence_only() -> None:
    rule = Recurrence.from_cron("0 1 * * *", NEW_YORK)
    assert fires_on(rule, NY_FALL) == ["10-31 05:00", "11-01 05:00", "11-02 06:00"]


def test_croniter_alone_double_fires_0100_on_fall_back() -> None:
    """Why the math is done on wall-clock time here: croniter with an aware start gives
    two distinct UTC instants for 01:00 on 1 November, which UNIQUE(schedule_id, fire_time)
    cannot catch."""
    zone = ZoneInfo(NEW_YORK)
    it = croniter("0 1 * * *", datetime(2026, 10, 31, 12, tzinfo=zone))
    theirs = [it.get_next(datetime).astimezone(UTC) for _ in range(3)]
    ours = [
        f.at
        for f in itertools.islice(
            fires_after(Recurrence.from_cron("0 1 * * *", NEW_YORK), utc("2026-10-31T16:00")), 3
        )
    ]
    assert len({t.date() for t in theirs}) < len(theirs)  # two fires on 1 November
    assert ours == [utc("2026-11-01T05:00"), utc("2026-11-02T06:00"), utc("2026-11-03T06:00")]


def test_new_york_0100_with_both_policy_fires_at_both_occurrences() -> None:
    rule = Recurrence.from_cron("0 1 * * *", NEW_YORK, dst_repeated=DstRepeated.BOTH)
    assert fires_on(rule, NY_FALL) == [
        "10-31 05:00",
        "11-01 05:00",
        "11-01 06:00",
        "11-02 06:00",
    ]


def test_new_york_0100_on_spring_forward_is_an_ordinary_day() -> None:
    rule = Recurrence.from_cron("0 1 * * *", NEW_YORK)
    assert fires_on(rule, NY_SPRING) == ["03-07 06:00", "03-08 06:00", "03-09 05:00"]


def test_new_york_every_15_minutes_follows_elapsed_time_through_fall_back() -> None:
    rule = Recurrence.from_cron("*/15 * * * *", NEW_YORK)
    fires = local_fires(rule, "2026-11-01T04:40", "2026-11-01T07:20")
    assert fires == [
        "2026-11-01 00:45 EDT",
        "2026-11-01 01:00 EDT",
        "2026-11-01 01:15 EDT",
        "2026-11-01 01:30 EDT",
        "2026-11-01 01:45 EDT",
        "2026-11-01 01:00 EST",
        "2026-11-01 01:15 EST",
        "2026-11-01 01:30 EST",
        "2026-11-01 01:45 EST",
        "2026-11-01 02:00 EST",
        "2026-11-01 02:15 EST",
    ]
    _assert_evenly_spaced(rule, utc("2026-11-01T00:00"), utc("2026-11-02T00:00"), minutes=15)


def test_new_york_every_15_minutes_has_no_fires_in_the_skipped_hour() -> None:
    rule = Recurrence.from_cron("*/15 * * * *", NEW_YORK)
    assert local_fires(rule, "2026-03-08T06:40", "2026-03-08T07:20") == [
        "2026-03-08 01:45 EST",
        "2026-03-08 03:00 EDT",
        "2026-03-08 03:15 EDT",
    ]
    _assert_evenly_spaced(rule, utc("2026-03-08T00:00"), utc("2026-03-09T00:00"), minutes=15)


def test_searching_from_inside_the_first_pass_of_a_repeated_hour_finds_the_second_pass() -> None:
    rule = Recurrence.from_cron("*/15 * * * *", NEW_YORK)
    after = utc("2026-11-01T05:50")  # 01:50 EDT, the first pass
    assert [f"{f.at:%H:%M}" for f in itertools.islice(fires_after(rule, after), 3)] == [
        "06:00",  # 01:00 EST
        "06:15",
        "06:30",
    ]


# ---- DST: Europe/London ------------------------------------------------------------------


def test_london_0100_on_spring_forward_fires_at_0200_bst() -> None:
    rule = Recurrence.from_cron("0 1 * * *", LONDON)
    assert local_fires(rule, "2026-03-28T00:00", "2026-03-31T00:00") == [
        "2026-03-28 01:00 GMT",
        "2026-03-29 02:00 BST",
        "2026-03-30 01:00 BST",
    ]


def test_london_0100_on_fall_back_fires_once() -> None:
    rule = Recurrence.from_cron("0 1 * * *", LONDON)
    assert local_fires(rule, "2026-10-24T00:00", "2026-10-27T00:00") == [
        "2026-10-24 01:00 BST",
        "2026-10-25 01:00 BST",
        "2026-10-26 01:00 GMT",
    ]


def test_london_0230_is_unaffected_by_either_change() -> None:
    rule = Recurrence.from_cron("30 2 * * *", LONDON)
    assert fires_on(rule, UK_SPRING) == ["03-28 02:30", "03-29 01:30", "03-30 01:30"]
    assert fires_on(rule, UK_FALL) == ["10-24 01:30", "10-25 02:30", "10-26 02:30"]


def test_london_every_15_minutes_through_both_changes() -> None:
    rule = Recurrence.from_cron("*/15 * * * *", LONDON)
    spring = local_fires(rule, "2026-03-29T00:40", "2026-03-29T01:20")
    assert spring == ["2026-03-29 00:45 GMT", "2026-03-29 02:00 BST", "2026-03-29 02:15 BST"]
    fall = local_fires(rule, "2026-10-25T00:00", "2026-10-25T02:00")
    assert Counter(f[11:16] for f in fall) == {
        "01:00": 2,
        "01:15": 2,
        "01:30": 2,
        "01:45": 2,
    }
    for day in (UK_SPRING, UK_FALL):
        start = utc(f"{day}T00:00") - timedelta(hours=3)
        _assert_evenly_spaced(rule, start, start + timedelta(hours=6), minutes=15)


@pytest.mark.parametrize("zone", [NEW_YORK, LONDON, "Australia/Sydney", "Australia/Lord_Howe"])
@pytest.mark.parametrize("expression", ["30 2 * * *", "0 1 * * *", "45 1 * * *", "0 0 * * *"])
def test_fixed_time_fires_exactly_once_per_local_day_for_a_whole_year(
    zone: str, expression: str
) -> None:
    """The classic rule as a property: one fire per intended local date, none lost, none
    doubled, whatever the zone's transitions (Lord Howe moves by 30 minutes)."""
    rule = Recurrence.from_cron(expression, zone)
    fires = list(fires_between(rule, utc("2026-01-01T00:00"), utc("2027-01-01T00:00")))
    dates = [f.local.date() for f in fires]
    assert len(dates) == len(set(dates))
    assert len(set(dates)) >= 364
    assert all(b.at > a.at for a, b in itertools.pairwise(fires))


@pytest.mark.parametrize("zone", [NEW_YORK, LONDON, "Australia/Lord_Howe"])
def test_wildcard_hour_is_evenly_spaced_for_a_whole_year(zone: str) -> None:
    rule = Recurrence.from_cron("*/15 * * * *", zone)
    _assert_evenly_spaced(rule, utc("2026-01-01T00:00"), utc("2027-01-01T00:00"), minutes=15)


def _assert_evenly_spaced(rule: Recurrence, start: datetime, end: datetime, minutes: int) -> None:
    fires = [f.at for f in fires_between(rule, start, end)]
    gaps = {b - a for a, b in itertools.pairwise(fires)}
    assert gaps == {timedelta(minutes=minutes)}


# ---- calendars: leap days, month ends, day fields ----------------------------------------


def test_leap_day_fires_only_in_leap_years() -> None:
    rule = Recurrence.from_cron("0 0 29 2 *", "UTC")
    fires = [f.at for f in itertools.islice(fires_after(rule, utc("2026-01-01T00:00")), 3)]
    assert fires == [utc("2028-02-29T00:00"), utc("2032-02-29T00:00"), utc("2036-02-29T00:00")]


def test_leap_day_across_a_skipped_leap_year_is_found_by_the_bounded_search() -> None:
    rule = Recurrence.from_cron("0 0 29 2 *", "UTC")
    # 2100 is not a leap year: from 2096 the next 29 February is in 2104.
    assert next_fire(rule, utc("2096-03-01T00:00")) == next_fire(rule, utc("2104-01-01T00:00"))
    fire = next_fire(rule, utc("2096-03-01T00:00"))
    assert fire is not None and fire.at == utc("2104-02-29T00:00")


@pytest.mark.parametrize("expression", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_cron_that_never_fires_has_no_next_fire(expression: str) -> None:
    assert next_fire(Recurrence.from_cron(expression, "UTC"), utc("2026-01-01T00:00")) is None


def test_day_31_skips_shorter_months() -> None:
    rule = Recurrence.from_cron("0 12 31 * *", "UTC")
    fires = fires_between(rule, utc("2026-01-01T00:00"), utc("2027-01-01T00:00"))
    assert [f.at.month for f in fires] == [1, 3, 5, 7, 8, 10, 12]


def test_last_day_of_month_follows_february_and_leap_years() -> None:
    rule = Recurrence.from_cron("0 23 L * *", "UTC")
    fires = list(fires_between(rule, utc("2027-12-01T00:00"), utc("2028-04-01T00:00")))
    assert [f"{f.at:%Y-%m-%d}" for f in fires] == [
        "2027-12-31",
        "2028-01-31",
        "2028-02-29",
        "2028-03-31",
    ]


def test_month_end_in_a_zone_east_of_utc_is_the_local_month_end() -> None:
    rule = Recurrence.from_cron("0 0 L * *", "Asia/Tokyo")
    fire = next_fire(rule, utc("2026-02-01T00:00"))
    assert fire is not None
    assert fire.local == wall("2026-02-28T00:00")
    assert fire.at == utc("2026-02-27T15:00")


def test_year_end_rolls_into_the_next_year() -> None:
    rule = Recurrence.from_cron("59 23 31 12 *", "UTC")
    fires = [f.at for f in itertools.islice(fires_after(rule, utc("2026-12-31T23:58")), 2)]
    assert fires == [utc("2026-12-31T23:59"), utc("2027-12-31T23:59")]


def test_day_of_month_and_weekday_both_restricted_means_either() -> None:
    rule = Recurrence.from_cron("0 0 13 * 5", "UTC")  # the 13th, and every Friday
    fires = fires_between(rule, utc("2026-02-01T00:00"), utc("2026-03-01T00:00"))
    assert [f.at.day for f in fires] == [6, 13, 20, 27]  # 13 Feb 2026 is a Friday too
    weekday_only = Recurrence.from_cron("0 0 * * 1", "UTC")  # day-of-month `*`: Mondays
    mondays = fires_between(weekday_only, utc("2026-02-01T00:00"), utc("2026-03-01T00:00"))
    assert [f.at.day for f in mondays] == [2, 9, 16, 23]


# ---- bounds and intervals ----------------------------------------------------------------


def test_start_and_end_bound_a_cron_inclusively() -> None:
    rule = Recurrence.from_cron(
        "0 * * * *", "UTC", start=utc("2026-05-01T10:00"), end=utc("2026-05-01T12:00")
    )
    fires = [f.at for f in fires_after(rule, utc("2026-01-01T00:00"))]
    assert fires == [utc("2026-05-01T10:00"), utc("2026-05-01T11:00"), utc("2026-05-01T12:00")]


def test_interval_fires_from_its_anchor() -> None:
    rule = Recurrence.every(90, utc("2026-05-01T10:00"), end=utc("2026-05-01T10:05"))
    assert [f"{f.at:%H:%M:%S}" for f in fires_after(rule, utc("2026-05-01T09:00"))] == [
        "10:00:00",
        "10:01:30",
        "10:03:00",
        "10:04:30",
    ]
    after = next_fire(rule, utc("2026-05-01T10:01:30"))
    assert after is not None and after.at == utc("2026-05-01T10:03")


def test_interval_ignores_dst_and_keeps_local_time_for_the_ledger() -> None:
    rule = Recurrence.every(3600, utc("2026-11-01T04:00"), timezone=NEW_YORK)
    fires = list(itertools.islice(fires_after(rule, utc("2026-11-01T03:00")), 4))
    assert [f.local.hour for f in fires] == [0, 1, 1, 2]
    assert {b.at - a.at for a, b in itertools.pairwise(fires)} == {timedelta(hours=1)}


@pytest.mark.parametrize(
    "rule",
    [
        Recurrence.every(7, utc("2026-05-01T10:00:03")),
        Recurrence.from_cron("*/5 * * * *", NEW_YORK),
    ],
)
def test_count_fires_matches_walking_them(rule: Recurrence) -> None:
    start, end = utc("2026-05-01T10:00"), utc("2026-05-01T13:17")
    walked = sum(1 for _ in fires_between(rule, start, end))
    assert count_fires(rule, start, end, cap=100_000) == (walked, True)
    assert count_fires(rule, start, end, cap=walked) == (walked, True)
    assert count_fires(rule, start, end, cap=walked - 1) == (walked - 1, False)
    assert count_fires(rule, start, end, cap=5) == (5, False)
    assert count_fires(rule, end, start, cap=5) == (0, True)
    assert count_fires(rule, start, start, cap=5) == (0, True)


def test_latest_fires_finds_the_newest_without_walking_a_year() -> None:
    rule = Recurrence.from_cron("* * * * *", "UTC")
    start, end = utc("2025-05-01T00:00"), utc("2026-05-01T00:00")
    newest = latest_fires(rule, start, end, 3)
    assert [f.at for f in newest] == [
        utc("2026-04-30T23:57"),
        utc("2026-04-30T23:58"),
        utc("2026-04-30T23:59"),
    ]
    assert latest_fires(rule, utc("2026-04-30T23:58"), end, 5) == newest[1:]
    assert latest_fires(rule, end, end, 5) == []


# ---- gaps a mutation run found: behaviour users rely on ---------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("@yearly", ["2027-01-01", "2028-01-01", "2029-01-01"]),
        ("0 0 1 6 *", ["2026-06-01", "2027-06-01", "2028-06-01"]),
        ("0 0 * 2 1", ["2026-02-02", "2026-02-09", "2026-02-16"]),
    ],
)
def test_a_restricted_month_field_fires_only_in_those_months(
    expression: str, expected: list[str]
) -> None:
    rule = Recurrence.from_cron(expression, "UTC")
    fires = itertools.islice(fires_after(rule, utc("2026-01-01T00:00")), 3)
    assert [f"{f.at:%Y-%m-%d}" for f in fires] == expected


def test_two_local_times_skipped_by_one_jump_fire_once_at_the_jump() -> None:
    rule = Recurrence.from_cron("0,30 2 * * *", NEW_YORK)
    assert local_fires(rule, "2026-03-07T00:00", "2026-03-10T00:00") == [
        "2026-03-07 02:00 EST",
        "2026-03-07 02:30 EST",
        "2026-03-08 03:00 EDT",  # 02:00 and 02:30 both shift to the jump: one fire
        "2026-03-09 02:00 EDT",
        "2026-03-09 02:30 EDT",
    ]


@pytest.mark.parametrize(
    ("zone", "expression", "day"),
    [
        (NEW_YORK, "30 2 * * *", "2026-03-08"),
        (LONDON, "30 1 * * *", "2026-03-29"),
        ("Europe/Berlin", "15 2 * * *", "2027-03-28"),
        ("Australia/Lord_Howe", "15 2 * * *", "2026-10-04"),  # a 30-minute jump
        ("Pacific/Chatham", "50 2 * * *", "2026-09-27"),  # at 02:45 local
        ("America/Santiago", "30 0 * * *", "2026-09-06"),  # at midnight
    ],
)
def test_a_skipped_time_fires_at_the_exact_second_the_clocks_jump(
    zone: str, expression: str, day: str
) -> None:
    rule = Recurrence.from_cron(expression, zone)
    around = fires_between(
        rule, utc(f"{day}T00:00") - timedelta(days=2), utc(f"{day}T00:00") + timedelta(days=2)
    )
    [fire] = [f for f in around if f"{f.local:%Y-%m-%d}" == day]
    assert fire.note is not None, "the local time is skipped that day"
    tz = ZoneInfo(zone)
    # the old offset holds one second before the fire, the new one at the fire
    assert (
        fire.at.astimezone(tz).utcoffset()
        != (fire.at - timedelta(seconds=1)).astimezone(tz).utcoffset()
    )


def test_an_interval_fires_once_at_its_start() -> None:
    start = utc("2026-05-01T10:00")
    rule = Recurrence.every(60, start)
    for after in (start - timedelta(hours=1), start - timedelta(microseconds=1)):
        first = list(itertools.islice(fires_after(rule, after), 2))
        assert [f.at for f in first] == [start, start + timedelta(minutes=1)]
    assert [f.at for f in itertools.islice(fires_after(rule, start), 1)] == [
        start + timedelta(minutes=1)
    ]
    assert next_fire(rule, start + timedelta(seconds=59)) == next_fire(rule, start)


def test_count_fires_of_an_interval_stops_at_its_end() -> None:
    start = utc("2026-05-01T10:00")
    rule = Recurrence.every(60, start, end=start + timedelta(minutes=10))
    window_end = start + timedelta(hours=1)
    assert count_fires(rule, start, window_end, cap=1000) == (11, True)  # end is inclusive
    assert count_fires(rule, start - timedelta(hours=1), window_end, cap=1000) == (11, True)
    assert count_fires(rule, start + timedelta(seconds=1), window_end, cap=1000) == (10, True)
    walked = sum(1 for _ in fires_between(rule, start, window_end))
    assert walked == 11
    assert count_fires(rule, start, window_end, cap=11) == (11, True)
    assert count_fires(rule, start, window_end, cap=10) == (10, False)


def test_latest_fires_walks_only_the_fires_near_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    walked = 0
    real_fires_after = cron.fires_after

    def counting(rule: Recurrence, after: datetime) -> Iterator[Fire]:
        nonlocal walked
        for fire in real_fires_after(rule, after):
            walked += 1
            yield fire

    monkeypatch.setattr(cron, "fires_after", counting)
    rule = Recurrence.from_cron("* * * * *", "UTC")
    start, end = utc("2025-05-01T00:00"), utc("2026-05-01T00:00")
    assert len(latest_fires(rule, start, end, 3)) == 3
    assert walked <= 40  # a year of minutes is 525,600
    walked = 0
    assert len(latest_fires(rule, start, end, 100)) == 100
    assert walked <= 4 * 100 + 40
    # 2 minutes hold 2 fires, 8 minutes hold 8: enough for 8, no third look (each look
    # also reads the fire at `end` to know it is done)
    walked = 0
    assert len(latest_fires(rule, start, end, 8)) == 8
    assert walked == (2 + 1) + (8 + 1)


def test_count_fires_of_an_interval_before_its_start_is_zero() -> None:
    start = utc("2026-05-01T10:00")
    rule = Recurrence.every(60, start)
    assert count_fires(rule, start - timedelta(hours=2), start - timedelta(hours=1), 100) == (
        0,
        True,
    )
    assert count_fires(rule, start - timedelta(hours=1), start, 100) == (0, True)
    assert count_fires(rule, start - timedelta(hours=1), start + EPSILON, 100) == (1, True)


def test_fires_between_is_exact_to_the_microsecond() -> None:
    start = utc("2026-05-01T10:00")
    rule = Recurrence.every(60, start)
    after_first = start + EPSILON
    assert [f.at for f in fires_between(rule, after_first, start + timedelta(minutes=2))] == [
        start + timedelta(minutes=1)
    ]
    cron_rule = Recurrence.from_cron("* * * * *", "UTC")
    assert [f.at for f in fires_between(cron_rule, after_first, start + timedelta(minutes=2))] == [
        start + timedelta(minutes=1)
    ]
    assert next_fire(cron_rule, start - EPSILON) == next_fire(
        cron_rule, start - timedelta(seconds=30)
    )


# ---- more gaps from the mutation run ----------------------------------------------------


@pytest.mark.parametrize("expression", ["0 0 * * 0", "0 0 * * sun", "0 0 * * 7", "@weekly"])
def test_sunday_schedules_fire_on_sundays(expression: str) -> None:
    rule = Recurrence.from_cron(expression, "UTC")
    fires = fires_between(rule, utc("2026-02-01T00:00"), utc("2026-03-01T00:00"))
    assert [f"{f.at:%a %d}" for f in fires] == ["Sun 01", "Sun 08", "Sun 15", "Sun 22"]


def test_an_interval_of_one_second_or_less_is_allowed() -> None:
    start = utc("2026-05-01T10:00")
    for seconds in (1, 0.5):
        rule = Recurrence.every(seconds, start)
        fires = fires_between(rule, start, start + timedelta(seconds=2))
        assert len(list(fires)) == 2 / seconds


def test_no_fire_at_or_past_the_latest_supported_instant() -> None:
    # LATEST (2200-01-01 00:00 UTC) is exclusive: a yearly cron's last fire is the one before
    yearly = Recurrence.from_cron("@yearly", "UTC")
    assert [f.at for f in fires_after(yearly, utc("2198-06-01T00:00"))] == [utc("2199-01-01T00:00")]
    every_day = Recurrence.every(86_400, utc("2199-12-30T00:00"))
    assert [f.at for f in fires_after(every_day, utc("2199-01-01T00:00"))] == [
        utc("2199-12-30T00:00"),
        utc("2199-12-31T00:00"),
    ]
    assert list(fires_after(every_day, utc("2200-01-01T00:00"))) == []


def test_a_cron_with_start_and_end_counts_only_the_fires_between_them() -> None:
    rule = Recurrence.from_cron(
        "0 * * * *", "UTC", start=utc("2026-05-01T10:00"), end=utc("2026-05-01T12:00")
    )
    window = (utc("2026-05-01T00:00"), utc("2026-05-02T00:00"))
    assert count_fires(rule, *window, cap=100) == (3, True)


def test_counting_a_century_of_an_interval_does_not_walk_its_fires() -> None:
    # the trigger counts a long outage's missed fires; every second for a century is
    # 3,155,760,000 fires, far too many to walk
    start = utc("2026-01-01T00:00")
    rule = Recurrence.every(1, start)
    end = utc("2126-01-01T00:00")
    assert count_fires(rule, start, end, cap=10**12) == (int((end - start).total_seconds()), True)


@pytest.mark.parametrize("minute", [1, 6, 7, 8])
def test_every_skipped_minute_fires_at_the_exact_second_of_the_jump(minute: int) -> None:
    # the search for the jump must land on it whatever local time it starts from
    rule = Recurrence.from_cron(f"{minute} 2 * * *", NEW_YORK)
    fire = next_fire(rule, utc("2026-03-07T12:00"))
    assert fire is not None and fire.at == utc("2026-03-08T07:00")


def test_one_microsecond_after_a_fire_no_longer_includes_it() -> None:
    start = utc("2026-05-01T10:00")
    rule = Recurrence.every(60, start)
    just_after = start + timedelta(microseconds=1)
    assert [f.at for f in fires_between(rule, just_after, start + timedelta(minutes=2))] == [
        start + timedelta(minutes=1)
    ]


@pytest.mark.parametrize(
    "rule",
    [Recurrence.from_cron("* * * * *", "UTC"), Recurrence.every(60, utc("2026-05-01T10:00"))],
)
def test_an_instant_past_the_supported_range_has_no_fires_and_no_error(rule: Recurrence) -> None:
    assert list(fires_after(rule, datetime.max.replace(tzinfo=UTC))) == []


# ---- the latest supported date ---------------------------------------------------------


def test_a_fire_past_the_latest_date_is_named_not_taken_for_never() -> None:
    rule = Recurrence.from_cron("0 0 29 2 *", "UTC")
    # 2200 is not a leap year: from 2196 the next 29 February is in 2204, past LATEST.
    assert next_fire(rule, utc("2196-03-01T00:00")) is None
    beyond = cron.fire_past_latest(rule, utc("2196-03-01T00:00"))
    assert beyond is not None and beyond.at == utc("2204-02-29T00:00")
    assert f"{beyond.local:%Y-%m-%d %H:%M}" == "2204-02-29 00:00"


def test_the_first_instant_of_the_latest_date_is_already_past_it() -> None:
    rule = Recurrence.from_cron("0 0 1 1 *", "UTC")
    beyond = cron.fire_past_latest(rule, utc("2199-06-01T00:00"))
    assert beyond is not None and beyond.at == limits.LATEST


def test_an_interval_past_the_latest_date_is_named() -> None:
    rule = Recurrence.every(86400 * 365, utc("2190-01-01T00:00"))
    # Its fires fall on 30 December: 2199's is the last before LATEST.
    assert next_fire(rule, utc("2199-12-31T00:00")) is None
    beyond = cron.fire_past_latest(rule, utc("2199-12-31T00:00"))
    assert beyond is not None and beyond.at == utc("2200-12-30T00:00")


def test_a_start_after_now_counts_from_the_start() -> None:
    rule = Recurrence.from_cron("0 0 1 1 *", "UTC", start=utc("2199-06-01T00:00"))
    beyond = cron.fire_past_latest(rule, utc("2026-01-01T00:00"))
    assert beyond is not None and beyond.at == utc("2200-01-01T00:00")


def test_a_search_from_the_start_itself_looks_past_the_start() -> None:
    start = utc("2199-01-01T00:00")  # a fire of its own: the bounds are inclusive
    rule = Recurrence.from_cron("0 0 1 1 *", "UTC", start=start)
    beyond = cron.fire_past_latest(rule, start)
    assert beyond is not None and beyond.at == limits.LATEST


def test_a_fire_on_the_end_itself_is_within_the_rule() -> None:
    rule = Recurrence.from_cron("0 0 1 1 *", "UTC", end=limits.LATEST)
    beyond = cron.fire_past_latest(rule, utc("2199-06-01T00:00"))
    assert beyond is not None and beyond.at == limits.LATEST


@pytest.mark.parametrize(
    ("after", "end"),
    [
        ("2026-01-01T00:00", None),  # it fires before LATEST: nothing to explain
        ("2196-03-01T00:00", "2199-01-01T00:00"),  # its own end comes first
    ],
)
def test_no_fire_past_the_latest_date_when_something_else_decides(
    after: str, end: str | None
) -> None:
    rule = Recurrence.from_cron("0 0 29 2 *", "UTC", end=utc(end) if end else None)
    assert cron.fire_past_latest(rule, utc(after)) is None


@pytest.mark.parametrize("expression", ["0 0 31 2 *", "0 0 30 2 *"])
def test_a_cron_that_never_fires_has_no_fire_past_the_latest_date_either(
    expression: str,
) -> None:
    rule = Recurrence.from_cron(expression, "UTC")
    assert cron.fire_past_latest(rule, utc("2196-03-01T00:00")) is None
