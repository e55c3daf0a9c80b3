"""A time zone field finds a zone by its city; only exact IANA names are zones; a zone's
next clock change is found to the second."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.zones import (
    ClockChange,
    iana_zone_names,
    next_clock_change,
    zone_by_city,
    zone_named,
)


@pytest.mark.parametrize(
    ("typed", "zone"),
    [
        ("berlin", "Europe/Berlin"),
        ("New York", "America/New_York"),
        ("new_york", "America/New_York"),
        ("  Tokyo ", "Asia/Tokyo"),
        ("europe/berlin", "Europe/Berlin"),
        ("utc", "UTC"),
        ("Europe/Berlin", "Europe/Berlin"),
    ],
)
def test_a_city_or_a_name_in_any_case_finds_its_zone(typed: str, zone: str) -> None:
    assert zone_by_city(typed) == zone


@pytest.mark.parametrize("typed", ["Berlinn", "Eastern", "Indianapolis", "", "x" * 200])
def test_what_names_no_zone_or_several_is_left_for_the_zone_rule_to_refuse(typed: str) -> None:
    """ "Eastern" is only an old alias's city; two zones are named Indianapolis."""
    assert zone_by_city(typed) == typed


def test_every_city_found_is_a_zone() -> None:
    for name in iana_zone_names():
        assert zone_by_city(name) == name
        assert zone_by_city(name.rsplit("/", 1)[-1]) in iana_zone_names() | {
            name.rsplit("/", 1)[-1]
        }


BERLIN = ZoneInfo("Europe/Berlin")
MARCH = datetime(2026, 3, 1, tzinfo=UTC)


def wall(*parts: int) -> datetime:
    """A local wall-clock time, naive as a ClockChange holds it."""
    return datetime(*parts, tzinfo=UTC).replace(tzinfo=None)  # type: ignore[misc]


SPRING = ClockChange(
    datetime(2026, 3, 29, 1, tzinfo=UTC), wall(2026, 3, 29, 2), wall(2026, 3, 29, 3)
)


def test_the_next_clock_change_is_found_to_the_second_with_the_local_times_around_it() -> None:
    spring = next_clock_change(BERLIN, MARCH)
    assert spring == SPRING and spring.forward
    # from a second before, still that change; from its instant on, the autumn one
    assert next_clock_change(BERLIN, SPRING.at - timedelta(seconds=1)) == SPRING
    autumn = next_clock_change(BERLIN, SPRING.at)
    assert autumn is not None and not autumn.forward
    assert (autumn.at, autumn.before, autumn.after) == (
        datetime(2026, 10, 25, 1, tzinfo=UTC), wall(2026, 10, 25, 3), wall(2026, 10, 25, 2)
    )  # fmt: skip
    assert autumn.after.fold == 1  # the second 02:00 of that night


def test_a_clock_change_is_only_found_within_its_horizon_and_in_zones_that_have_one() -> None:
    # the change comes on the 29th day after 1 March (at 01:00 UTC on 29 March)
    assert next_clock_change(BERLIN, MARCH, days=28) is None
    assert next_clock_change(BERLIN, MARCH, days=29) == SPRING
    assert next_clock_change(ZoneInfo("UTC"), MARCH) is None
    assert next_clock_change(ZoneInfo("Asia/Tokyo"), MARCH) is None
    # a half-hour change (Lord Howe Island ends its summer time in April)
    lord_howe = next_clock_change(ZoneInfo("Australia/Lord_Howe"), datetime(2026, 1, 1, tzinfo=UTC))
    assert lord_howe is not None and not lord_howe.forward
    assert lord_howe.at == datetime(2026, 4, 4, 15, tzinfo=UTC)
    assert lord_howe.before - lord_howe.after == timedelta(minutes=30)


def test_a_zone_is_named_exactly_or_refused_with_a_sentence() -> None:
    assert zone_named("Europe/Berlin") == BERLIN
    with pytest.raises(RecurrenceError, match=r"^unknown time zone 'Mars/Olympus'; use an IANA"):
        zone_named("Mars/Olympus")
    with pytest.raises(RecurrenceError) as long_name:
        zone_named("x" * 200)
    assert f"'{'x' * 60}…'" in str(long_name.value) and "x" * 61 not in str(long_name.value)
    assert "posix/Europe/Berlin" not in iana_zone_names()  # files beside the zones are not zones


@pytest.mark.parametrize(
    "start",
    [
        datetime(2026, 3, 1, 0, 0, 7, 500_000, tzinfo=UTC),  # odd seconds: uneven midpoints
        datetime(2026, 3, 28, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 3, 29, 0, 59, 58, tzinfo=UTC),  # two seconds before
        datetime(2026, 2, 26, 17, 33, 1, 250_000, tzinfo=UTC),
    ],
)
def test_a_clock_change_is_found_to_the_second_from_any_starting_instant(start: datetime) -> None:
    assert next_clock_change(BERLIN, start) == SPRING


def test_a_zone_name_is_shown_whole_up_to_sixty_characters() -> None:
    for length, shown in ((60, "x" * 60), (61, "x" * 60 + "…"), (59, "x" * 59)):
        with pytest.raises(RecurrenceError) as refused:
            zone_named("x" * length)
        assert f"'{shown}'" in str(refused.value), length


@settings(max_examples=200, deadline=None)
@given(
    st.datetimes(
        min_value=wall(2025, 10, 27),
        max_value=wall(2026, 3, 29, 0, 59, 59),
        timezones=st.just(UTC),
    )
)
def test_the_spring_change_is_found_to_the_second_from_any_instant_before_it(
    start: datetime,
) -> None:
    assert next_clock_change(BERLIN, start) == SPRING
