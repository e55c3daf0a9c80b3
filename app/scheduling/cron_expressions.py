"""Reading a cron expression as cronie's crontab(5) reads it: the standard 5 fields, the
`@hourly`-style aliases and `L` for the last day of the month, with names for months and
weekdays. Pure: `parse_cron` gives a `CronExpression` that finds the next matching local
wall time, or raises `RecurrenceError` saying why the text is not a rule.

The fire times themselves (time zones, daylight saving) are `app.scheduling.cron`.
"""

from __future__ import annotations

import bisect
import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache

# How far ahead a cron may be searched for its next fire: `0 0 29 2 *` waits up to 8 years
# (2096 -> 2104 skips a leap year), so 9 years tells "rare" from "never".
SEARCH_YEARS = 9
SEARCH_SPAN = timedelta(days=366 * SEARCH_YEARS)
ONE_DAY = timedelta(days=1)


ONE_MINUTE = timedelta(minutes=1)


ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")


# Standard cron syntax per field; croniter accepts more (`#`, `W`, `H`, seconds) but those
# are not portable and some are silently ignored, so they are refused up front.
_FIELD_SYNTAX = (
    re.compile(r"^[0-9*,/\-]+$"),
    re.compile(r"^[0-9*,/\-]+$"),
    re.compile(r"^([0-9*,/\-]|L)+$", re.IGNORECASE),
    re.compile(r"^[0-9a-z*,/\-]+$", re.IGNORECASE),
    re.compile(r"^[0-9a-z*,/\-]+$", re.IGNORECASE),
)


class RecurrenceError(ValueError):
    """A cron expression, interval or time zone Sundial cannot use; one-sentence message."""


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A parsed 5-field cron expression, matched against local wall-clock times."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    last_day: bool  # `L` in the day-of-month field
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    # Vixie cron: when both day fields are restricted, a day matching either one fires.
    days_or_weekdays: bool
    fixed_hour: bool  # hour field is not `*` or `*/n`: the DST options apply

    def matches_day(self, day: date) -> bool:
        in_days = day.day in self.days or (
            self.last_day and day.day == calendar.monthrange(day.year, day.month)[1]
        )
        in_weekdays = day.isoweekday() % 7 in self.weekdays
        if self.days_or_weekdays:
            return in_days or in_weekdays
        return in_days and in_weekdays

    def next_wall_time(self, after: datetime) -> datetime | None:
        """The first matching local time strictly after the naive `after`, or None when
        nothing matches within `SEARCH_YEARS`."""
        # (positional constructors: datetime.replace with keywords is several times slower)
        start = datetime.combine(after.date(), time(after.hour, after.minute)) + ONE_MINUTE
        day = start.date()
        earliest: time | None = start.time()
        limit = day + SEARCH_SPAN
        while day <= limit:
            if day.month not in self.months:
                day = _first_of_next_month(day)
                earliest = None
                continue
            if self.matches_day(day):
                at = self._first_time_of_day(earliest)
                if at is not None:
                    return datetime.combine(day, at)
            day += ONE_DAY
            earliest = None
        return None

    def _first_time_of_day(self, earliest: time | None) -> time | None:
        if earliest is None:
            return time(self.hours[0], self.minutes[0])
        i = bisect.bisect_left(self.hours, earliest.hour)
        if i < len(self.hours) and self.hours[i] == earliest.hour:
            j = bisect.bisect_left(self.minutes, earliest.minute)
            if j < len(self.minutes):
                return time(earliest.hour, self.minutes[j])
            i += 1
        if i < len(self.hours):
            return time(self.hours[i], self.minutes[0])
        return None


def _first_of_next_month(day: date) -> date:
    return date(day.year + day.month // 12, day.month % 12 + 1, 1)


@lru_cache(maxsize=4096)
def parse_cron(text: str) -> CronExpression:
    """Parse a standard cron expression or alias, or raise RecurrenceError saying why."""
    normalized = " ".join(text.split())
    if normalized.startswith("@"):
        if normalized.lower() not in ALIASES:
            aliases = ", ".join(ALIASES)
            raise RecurrenceError(f"unknown cron alias {normalized!r}; use one of {aliases}")
        normalized = ALIASES[normalized.lower()]
    fields = normalized.split(" ")
    if len(fields) != len(FIELD_NAMES):
        raise RecurrenceError(
            f"cron expression {text!r} must have 5 fields (minute hour day-of-month month "
            f"day-of-week) or be an alias like @hourly, not {len(fields)}"
        )
    for name, field, syntax in zip(FIELD_NAMES, fields, _FIELD_SYNTAX, strict=True):
        if not syntax.match(field):
            raise RecurrenceError(
                f"cron expression {text!r} has an unsupported {name} field {field!r}; use "
                f"numbers, names, *, ranges, lists and steps (and L for the last day)"
            )
    minute, hour, day, month, weekday = (
        _field_values(name, field, text) for name, field in zip(FIELD_NAMES, fields, strict=True)
    )
    return CronExpression(
        text=normalized,
        minutes=tuple(sorted(minute)),
        hours=tuple(sorted(hour)),
        days=frozenset(v for v in day if v != LAST_DAY),
        last_day=LAST_DAY in day,
        months=frozenset(month),
        weekdays=frozenset(v % 7 for v in weekday),  # 7 is Sunday too
        days_or_weekdays=not fields[2].startswith("*") and not fields[4].startswith("*"),
        fixed_hour=not fields[1].startswith("*"),
    )


LAST_DAY = 99  # `L` among the day-of-month values


# field -> (lowest, highest) value, as in crontab(5); day-of-week 7 is Sunday
_FIELD_RANGE = {
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 31),
    "month": (1, 12),
    "day-of-week": (0, 7),
}


_NAMES = {
    "month": {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m},
    "day-of-week": {d.lower(): (i + 1) % 7 for i, d in enumerate(calendar.day_abbr)},
}


_ITEM = re.compile(r"^(?:(\*)|([0-9a-z]+)(?:-([0-9a-z]+))?)(?:/([0-9]+))?$", re.IGNORECASE)


def _field_values(name: str, field: str, text: str) -> set[int]:
    """The values one field allows, read as cronie reads them: lists of `*`, `n`, `a-b`,
    each with an optional `/step` (`a/step` runs from a to the end of the field), names for
    months and weekdays, `L` for the last day of the month. A single-value range `9-9` is
    exactly 9; reversed ranges and steps wider than the field are refused."""
    low, high = _FIELD_RANGE[name]
    values: set[int] = set()
    for item in field.split(","):
        if name == "day-of-month" and item.upper() == "L":
            values.add(LAST_DAY)
            continue
        match = _ITEM.match(item)
        if not match:
            raise RecurrenceError(
                f"{text!r} is not a valid cron expression: the {name} field has {item!r}"
            )
        star, first, last, step = match.groups()
        if star:
            start, end = low, high if name != "day-of-week" else 6
        else:
            start = _field_number(name, first, text)
            end = _field_number(name, last, text) if last else (high if step else start)
            if name == "day-of-week" and last and last.lower() == "sun":
                end = 7  # `fri-sun`: Sunday closes the week here
            if end < start:
                raise RecurrenceError(
                    f"{text!r} is not a valid cron expression: the {name} range {item!r} is "
                    f"reversed; write the lower value first"
                )
        stride = 1
        if step is not None:
            stride = int(step)
            if not 1 <= stride <= high - low:
                raise RecurrenceError(
                    f"{text!r} is not a valid cron expression: the {name} step {step} is "
                    f"not between 1 and {high - low}"
                )
        values.update(range(start, end + 1, stride))
    return values


def _field_number(name: str, word: str, text: str) -> int:
    low, high = _FIELD_RANGE[name]
    names = _NAMES.get(name, {})
    if word.lower() in names:
        return names[word.lower()]
    if not (word.isascii() and word.isdigit()) or len(word) > 2 or not low <= int(word) <= high:
        raise RecurrenceError(
            f"{text!r} is not a valid cron expression: the {name} field has {word!r}; "
            f"use a number from {low} to {high}" + (" or a name" if names else "")
        )
    return int(word)
