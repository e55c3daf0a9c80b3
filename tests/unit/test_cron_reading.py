# ruff: noqa: DTZ001, RUF001  (wall-clock times are naive on purpose; odd digits are the point)
"""Sundial's reading of cron rules against an independent one written here from crontab(5).

The reading in this file is deliberately naive (a set of values per field, days checked one
by one), so that a disagreement points at `app.scheduling.cron`, not at a shared helper.
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.scheduling.cron import Recurrence, next_fire
from app.scheduling.cron_expressions import CronExpression, RecurrenceError, parse_cron
from app.scheduling.cron_words import cron_sentence

BOUNDS = {0: (0, 59), 1: (0, 23), 2: (1, 31), 3: (1, 12), 4: (0, 7)}
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
HORIZON_DAYS = 4 * 366


def independent_values(index: int, field: str) -> tuple[set[int], bool]:
    """crontab(5): the values of one field, and whether it holds `L` (last day)."""
    low, high = BOUNDS[index]
    values: set[int] = set()
    last = False
    for item in field.split(","):
        if item == "L":
            last = True
            continue
        body, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            first, final = low, high
        elif "-" in body:
            a, b = body.split("-")
            first, final = number(index, a), number(index, b)
            if index == 4 and b == "sun":
                final = 7
        else:
            first = number(index, body)
            final = high if step_text else first
        values.update(range(first, final + 1, step))
    if index == 4:
        values = {v % 7 for v in values}
    return values, last


def number(index: int, text: str) -> int:
    if index == 3 and text in MONTHS:
        return MONTHS.index(text) + 1
    if index == 4 and text in DAYS:
        return DAYS.index(text)
    return int(text)


def independent_next(expression: str, after: datetime) -> datetime | None:
    """The first minute strictly after the naive `after` that the rule names."""
    fields = expression.split(" ")
    minutes, _ = independent_values(0, fields[0])
    hours, _ = independent_values(1, fields[1])
    days, last = independent_values(2, fields[2])
    months, _ = independent_values(3, fields[3])
    weekdays, _ = independent_values(4, fields[4])
    either = not fields[2].startswith("*") and not fields[4].startswith("*")
    day = after.date()
    for _ in range(HORIZON_DAYS):
        month_days = calendar.monthrange(day.year, day.month)[1]
        in_days = day.day in days or (last and day.day == month_days)
        in_weekdays = (day.weekday() + 1) % 7 in weekdays
        wanted = (in_days or in_weekdays) if either else (in_days and in_weekdays)
        if day.month in months and wanted:
            for hour in sorted(hours):
                for minute in sorted(minutes):
                    at = datetime(day.year, day.month, day.day, hour, minute)
                    if at > after:
                        return at
        day += timedelta(days=1)
    return None


def item(index: int) -> st.SearchStrategy[str]:
    low, high = BOUNDS[index]
    top = 6 if index == 4 else high
    value = st.integers(low, top)
    plain = value.map(str)
    ranged = st.tuples(value, value).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(st.sampled_from(["*", "R", "V"]), st.integers(1, high - low), value, value)
    options = [plain, ranged, stepped.map(lambda t: _stepped(*t))]
    if index == 2:
        options.append(st.just("L"))
    if index == 3:
        options.append(st.sampled_from(MONTHS))
        options.append(
            st.tuples(st.integers(0, 11), st.integers(0, 11)).map(
                lambda p: f"{MONTHS[min(p)]}-{MONTHS[max(p)]}"
            )
        )
    if index == 4:
        options.append(st.sampled_from(DAYS))
        options.append(st.sampled_from(["mon-fri", "fri-sun", "sat-sun", "5-7", "0-6"]))
    return st.one_of(*options)


def _stepped(base: str, step: int, a: int, b: int) -> str:
    if base == "*":
        return f"*/{step}"
    if base == "R":
        return f"{min(a, b)}-{max(a, b)}/{step}"
    return f"{a}/{step}"


def field(index: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just("*"),
        st.lists(item(index), min_size=1, max_size=3).map(",".join),
    )


expressions = st.tuples(*(field(i) for i in range(5))).map(" ".join)
starts = st.datetimes(datetime(2024, 1, 1), datetime(2031, 12, 31))


@settings(max_examples=3000, deadline=None)
@given(expressions, starts)
def test_fires_agree_with_an_independent_reading(expression: str, start: datetime) -> None:
    rule = parse_cron(expression)
    ours = agreed_next(rule, expression, start)
    if ours is not None:
        agreed_next(rule, expression, ours)  # and the fire after it too


def agreed_next(rule: CronExpression, expression: str, after: datetime) -> datetime | None:
    """Our next fire after `after`, checked against the independent reading; None past the
    reading's horizon (a rule such as `0 0 */26 3 0` may next fire 7 years on)."""
    ours = rule.next_wall_time(after)
    theirs = independent_next(expression, after.replace(second=0, microsecond=0))
    if theirs is None:
        assert ours is None or ours.date() > after.date() + timedelta(days=HORIZON_DAYS - 2)
        return None
    assert ours == theirs, expression
    return ours


@settings(max_examples=300, deadline=None)
@given(expressions, starts)
def test_utc_fires_are_the_wall_times(expression: str, start: datetime) -> None:
    fire = next_fire(Recurrence.from_cron(expression, "UTC"), start.replace(tzinfo=UTC))
    expected = independent_next(expression, start.replace(second=0, microsecond=0))
    if expected is not None:
        assert fire is not None and fire.at == expected.replace(tzinfo=UTC), expression


@settings(max_examples=500, deadline=None)
@given(expressions)
def test_the_sentence_reads_a_single_value_range_as_the_value(expression: str) -> None:
    """Writing each plain value `n` as the range `n-n` changes neither fires nor words."""
    doubled = " ".join(
        ",".join(f"{i}-{i}" if i.isdigit() else i for i in f.split(","))
        for f in expression.split(" ")
    )
    assert cron_sentence(doubled) == cron_sentence(expression)
    assert parse_cron(doubled).next_wall_time(datetime(2026, 1, 1)) == parse_cron(
        expression
    ).next_wall_time(datetime(2026, 1, 1))


def test_a_single_value_range_is_that_value() -> None:
    day = datetime(2026, 12, 3, 10, 0)
    rule = parse_cron("0 9-9 * * *")
    assert rule.hours == (9,)
    assert rule.next_wall_time(day) == datetime(2026, 12, 4, 9, 0)
    assert cron_sentence("0 9-9 * * *") == cron_sentence("0 9 * * *") == "At 09:00"
    assert parse_cron("4-4 2-2 3-3 5-5 1-1").minutes == (4,)


def test_day_of_month_step_beside_a_weekday_needs_both() -> None:
    """`*/2` starts with `*`, so cron fires on odd days that are also Mondays."""
    rule = parse_cron("0 9 */2 * 1")
    fires = []
    at = datetime(2026, 1, 1)
    for _ in range(4):
        nxt = rule.next_wall_time(at)
        assert nxt is not None
        fires.append(nxt)
        at = nxt
    assert all(f.day % 2 == 1 and f.weekday() == 0 for f in fires)
    assert "only when that day is a Monday" in cron_sentence("0 9 */2 * 1")
    either = parse_cron("0 9 1-7 * 1")
    assert either.days_or_weekdays
    assert "or on Monday" in cron_sentence("0 9 1-7 * 1")


@pytest.mark.parametrize(
    "rule",
    [
        "5-2 * * * *",
        "*/1000 * * * *",
        "*/0 * * * *",
        "60 * * * *",
        "0 24 * * *",
        "0 0 0 * *",
        "0 0 32 * *",
        "0 0 * 13 *",
        "0 0 * * 8",
        "0 0 * * fri-mon",
        "1,,2 * * * *",
        "٣ * * * *",
        "0 0 * * ３",
        "0 0 1-31/40 * *",
        "0 0 * xyz *",
        "0 0 L-2 * *",
    ],
)
def test_odd_rules_are_refused_with_a_sentence(rule: str) -> None:
    with pytest.raises(RecurrenceError) as refused:
        parse_cron(rule)
    assert rule in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "name",
    ["posix", "right/UTC", "posix/Europe/Paris", "Etc/", "zone.tab", "../x", "localtime",
     "Factory", "Europe/Paris/", "europe/paris", "a" * 300, "UTC\n", "Europe/Pa\x00ris"],
)  # fmt: skip
def test_only_iana_zone_names_are_zones(name: str) -> None:
    with pytest.raises(RecurrenceError, match="unknown time zone"):
        Recurrence.from_cron("0 9 * * *", name)


@pytest.mark.parametrize("name", ["UTC", "Europe/Paris", "US/Eastern", "Asia/Calcutta", "EST5EDT"])
def test_iana_zones_and_their_links_are_zones(name: str) -> None:
    assert Recurrence.from_cron("0 9 * * *", name).zone.key == name
