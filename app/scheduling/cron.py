"""Pure recurrence math: the fire times of a cron expression or an interval, in a time zone.

Nothing here reads a clock: every function takes the instants it works from, so tests are
plain calls with fixed times.

    >>> rule = Recurrence.from_cron("30 2 * * *", "America/New_York")
    >>> next_fire(rule, datetime(2026, 3, 7, 12, tzinfo=UTC)).at.isoformat()
    '2026-03-08T07:00:00+00:00'

Cron expressions are read here as cronie's crontab(5) reads them (the standard 5 fields, the
`@hourly`-style aliases and `L` for the last day of the month): one reading serves the fires,
the sentence shown (`app.scheduling.cron_words`), the preview and the ledger. They are matched on
local wall-clock time, and each local time is mapped to UTC with zoneinfo (croniter's own handling
of daylight saving double-fires `0 1 * * *` on a fall-back night in some versions, and its
field expansion reads `9-9` as `*`). The rule, as in Vixie cron:

* A fixed-time schedule (hour field neither `*` nor `*/n`) fires once per intended local time.
  A local time skipped by spring-forward fires at the instant the clocks jump, which is the
  next valid instant (`30 2 * * *` in New York fires at 03:00 EDT); with `DstSkipped.SKIP` it
  does not fire that day. A local time repeated by fall-back fires at its first occurrence;
  with `DstRepeated.BOTH` at both.
* A wildcard-hour schedule (`*/15 * * * *`, `0 * * * *`, `0 */2 * * *`) follows elapsed
  time: local times that do not exist do not fire, repeated ones fire in both occurrences.
  The two DST options do not apply to it.

Fires that land on the same instant are one fire (two skipped times shifted to the jump).
"""

from __future__ import annotations

import bisect
import calendar
import heapq
import itertools
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from functools import lru_cache
from importlib.resources import files
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.core.limits import LATEST

# How far ahead a cron may be searched for its next fire: `0 0 29 2 *` waits up to 8 years
# (2096 -> 2104 skips a leap year), so 9 years tells "rare" from "never".
SEARCH_YEARS = 9
SEARCH_SPAN = timedelta(days=366 * SEARCH_YEARS)
ONE_DAY = timedelta(days=1)
ONE_MINUTE = timedelta(minutes=1)
EPSILON = timedelta(microseconds=1)
ZERO = timedelta(0)
FIRST_LOOKBACK = timedelta(minutes=2)  # `latest_fires` looks this far back first, then 4x

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


class DstSkipped(StrEnum):
    """What a fixed-time schedule does with a local time that spring-forward skips."""

    SHIFT = "shift"
    """Fire at the instant the clocks jump: the next valid instant (the default)."""

    SKIP = "skip"
    """Do not fire for that local time."""


class DstRepeated(StrEnum):
    """What a fixed-time schedule does with a local time that fall-back repeats."""

    FIRST = "first"
    """Fire at the first occurrence only (the default)."""

    BOTH = "both"
    """Fire at both occurrences."""


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


@lru_cache(maxsize=1)
def iana_zone_names() -> frozenset[str]:
    """The names the IANA tz database lists as zones (links such as US/Eastern included),
    as the tzdata package records them: not the files and folders beside them in a system's
    zoneinfo folder (`posix/...`, `right/...`, `localtime`, `zone.tab`)."""
    return frozenset(files("tzdata").joinpath("zones").read_text().split()) - {"Factory"}


# The regions of the tz database's own zone names (not the old aliases like US/Eastern).
_REGIONS = ("Africa/", "America/", "Antarctica/", "Asia/", "Atlantic/", "Australia/", "Europe/",
            "Indian/", "Pacific/")  # fmt: skip


@lru_cache(maxsize=1)
def _zones_by_city() -> dict[str, list[str]]:
    """Zone names by their city (and by the whole name), compared without case."""
    by_city: dict[str, list[str]] = {}
    for name in sorted(iana_zone_names()):
        by_city.setdefault(_city_key(name), []).append(name)
        if name.startswith(_REGIONS):
            by_city.setdefault(_city_key(name.rsplit("/", 1)[-1]), []).append(name)
    return by_city


def _city_key(text: str) -> str:
    return " ".join(text.replace("_", " ").split()).casefold()


def zone_by_city(text: str) -> str:
    """What a person typed in a time zone field: a zone's name as is, or the one zone whose
    city it names ("berlin", "New York" -> "America/New_York"); else `text` unchanged, for
    `zone_named` to refuse with its sentence. Forms only: the API takes exact names."""
    if text in iana_zone_names() or len(text) > 100:
        return text
    found = _zones_by_city().get(_city_key(text), [])
    return found[0] if len(found) == 1 else text


@lru_cache(maxsize=1024)
def zone_named(name: str) -> ZoneInfo:
    """The IANA time zone `name`; RecurrenceError for any other (never silently UTC)."""
    if name not in iana_zone_names():
        shown = name if len(name) <= 60 else name[:60] + "…"
        raise RecurrenceError(
            f"unknown time zone {shown!r}; use an IANA name like Europe/Berlin or UTC"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise RecurrenceError(
            f"unknown time zone {name!r}; use an IANA name like Europe/Berlin or UTC"
        ) from None


class Fire(NamedTuple):
    """One fire of a schedule: the UTC instant, and the local time it was meant for.

    (A named tuple: the trigger creates one per fire, and a frozen dataclass costs more.)
    """

    at: datetime
    local: datetime  # naive wall-clock time in the schedule's zone that this fire stands for
    note: str | None = None  # how DST moved it, when it did


@dataclass(frozen=True, slots=True)
class Recurrence:
    """When a schedule fires: a cron expression in a zone, or every `interval` from `start`.

    For a cron, `start` and `end` bound the fires (inclusive); for an interval, `start` is
    the anchor and first fire.
    """

    zone: ZoneInfo
    cron: CronExpression | None = None
    interval: timedelta | None = None
    start: datetime | None = None
    end: datetime | None = None
    dst_skipped: DstSkipped = DstSkipped.SHIFT
    dst_repeated: DstRepeated = DstRepeated.FIRST

    @classmethod
    def from_cron(
        cls,
        expression: str,
        timezone: str = "UTC",
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        dst_skipped: DstSkipped = DstSkipped.SHIFT,
        dst_repeated: DstRepeated = DstRepeated.FIRST,
    ) -> Recurrence:
        return cls(
            zone=zone_named(timezone),
            cron=parse_cron(expression),
            start=start,
            end=end,
            dst_skipped=dst_skipped,
            dst_repeated=dst_repeated,
        )

    @classmethod
    def every(
        cls,
        seconds: float,
        start: datetime,
        *,
        end: datetime | None = None,
        timezone: str = "UTC",
    ) -> Recurrence:
        if seconds <= 0:
            raise RecurrenceError(f"an interval must be more than 0 seconds, got {seconds:g}")
        return cls(
            zone=zone_named(timezone),
            interval=timedelta(seconds=seconds),
            start=start,
            end=end,
        )


def fires_after(rule: Recurrence, after: datetime) -> Iterator[Fire]:
    """Every fire strictly after the instant `after`, in time order, until `rule.end`.

    Every schedule ends at `limits.LATEST` at the latest: past it, dates soon stop fitting
    in a datetime, and no schedule may run into that."""
    if rule.start is not None and after < rule.start:
        after = rule.start - EPSILON
    if after >= LATEST:
        return
    fires = _interval_fires(rule, after) if rule.cron is None else _cron_fires(rule, after)
    for fire in fires:
        if fire.at >= LATEST or (rule.end is not None and fire.at > rule.end):
            return
        yield fire


def next_fire(rule: Recurrence, after: datetime) -> Fire | None:
    """The first fire strictly after `after`, or None when the schedule has ended."""
    return next(fires_after(rule, after), None)


def fire_past_latest(rule: Recurrence, after: datetime) -> Fire | None:
    """Why `next_fire` found nothing, when the reason is `limits.LATEST`: the rule's first
    fire after `after`, which lies at or past LATEST (and within the rule's own end).
    None when the rule has a fire before LATEST, ends first, or never matches at all
    (30 February)."""
    if rule.start is not None and after < rule.start:
        after = rule.start - EPSILON
    fires = _interval_fires(rule, after) if rule.cron is None else _cron_fires(rule, after)
    fire = next(fires, None)
    if fire is None or fire.at < LATEST or (rule.end is not None and fire.at > rule.end):
        return None
    return fire


def fires_between(rule: Recurrence, start: datetime, end: datetime) -> Iterator[Fire]:
    """Fires at or after `start` and strictly before `end`."""
    for fire in fires_after(rule, start - EPSILON):
        if fire.at >= end:
            return
        yield fire


def latest_fires(rule: Recurrence, start: datetime, end: datetime, count: int) -> list[Fire]:
    """The newest `count` fires in [`start`, `end`), oldest first, without walking from
    `start`: a long outage on `* * * * *` costs the fires kept, not the fires missed."""
    lookback = FIRST_LOOKBACK
    while True:
        window_start = max(start, end - lookback)
        kept = deque(fires_between(rule, window_start, end), maxlen=count)
        if len(kept) >= count or window_start == start:
            return list(kept)
        lookback *= 4


def count_fires(rule: Recurrence, start: datetime, end: datetime, cap: int) -> tuple[int, bool]:
    """How many fires lie in [`start`, `end`): (count, exact). Stops counting at `cap`."""
    if rule.interval is not None and rule.start is not None:
        if rule.end is not None:
            end = min(end, rule.end + EPSILON)
        return _count_interval_fires(rule.interval, rule.start, start, end, cap)
    counted = sum(1 for _ in itertools.islice(fires_between(rule, start, end), cap + 1))
    return min(counted, cap), counted <= cap


def local_time(rule: Recurrence, instant: datetime) -> datetime:
    """The naive wall-clock time of `instant` in the rule's zone."""
    return instant.astimezone(rule.zone).replace(tzinfo=None)


# ---- intervals --------------------------------------------------------------------------


def _interval_fires(rule: Recurrence, after: datetime) -> Iterator[Fire]:
    assert rule.interval is not None and rule.start is not None
    k = max(0, (after - rule.start) // rule.interval + 1)
    while True:
        at = rule.start + k * rule.interval
        yield Fire(at, local_time(rule, at))
        k += 1


def _count_interval_fires(
    interval: timedelta, anchor: datetime, start: datetime, end: datetime, cap: int
) -> tuple[int, bool]:
    if end <= start:
        return 0, True
    first = max(0, -((anchor - start) // interval))  # ceil((start - anchor) / interval)
    past_end = max(0, -((anchor - end) // interval))
    counted = max(0, past_end - first)
    return min(counted, cap), counted <= cap


# ---- cron on local wall-clock time ------------------------------------------------------


def _cron_fires(rule: Recurrence, after: datetime) -> Iterator[Fire]:
    """Walk matching local times in wall-clock order, map each to its instants, and emit
    them in instant order. Only the second occurrences of a repeated hour come out of
    wall-clock order, so they wait in a small heap until a later instant is reached."""
    assert rule.cron is not None
    cron, zone = rule.cron, rule.zone
    local_after = after.astimezone(zone)
    wall = datetime.combine(local_after.date(), local_after.time())
    if local_after.fold == 0 and _near_transition(zone, wall.date()):
        repeated_span = _offset(local_after) - _offset(local_after.replace(fold=1))
        if repeated_span > ZERO:
            # `after` is in the first pass of a repeated hour: the second pass of earlier
            # local times is still ahead, so start from the beginning of the repeated span.
            wall -= repeated_span
    seconds: list[tuple[datetime, int, Fire]] = []
    order = itertools.count()
    last = after
    give_up_after = wall + SEARCH_SPAN  # matches that never map to an instant
    while True:
        next_wall = cron.next_wall_time(wall)
        if next_wall is None or next_wall > give_up_after:
            break
        wall = next_wall
        first, second = _map_wall_time(rule, wall)
        if first is not None:
            give_up_after = wall + SEARCH_SPAN
            while seconds and seconds[0][0] <= first.at:
                fire = heapq.heappop(seconds)[2]
                if fire.at > last:
                    last = fire.at
                    yield fire
            if first.at > last:
                last = first.at
                yield first
        if second is not None:
            heapq.heappush(seconds, (second.at, next(order), second))
    while seconds:
        fire = heapq.heappop(seconds)[2]
        if fire.at > last:
            last = fire.at
            yield fire


def _map_wall_time(rule: Recurrence, wall: datetime) -> tuple[Fire | None, Fire | None]:
    """The fire(s) a matching local time stands for: (in order, second occurrence)."""
    assert rule.cron is not None
    zone = rule.zone
    offset_earlier = _offset_of_wall(zone, wall)
    as_utc = datetime.combine(wall.date(), wall.time(), UTC)  # the wall time labelled UTC
    if not _near_transition(zone, wall.date()):
        return Fire(as_utc - offset_earlier, wall), None
    offset_later = _offset_of_wall(zone, wall.replace(fold=1))
    if offset_earlier == offset_later:
        return Fire(as_utc - offset_earlier, wall), None
    fixed = rule.cron.fixed_hour
    if offset_earlier > offset_later:  # fall-back: this local time happens twice
        first = Fire(as_utc - offset_earlier, wall)
        if fixed and rule.dst_repeated is DstRepeated.FIRST:
            return first, None
        second = Fire(as_utc - offset_later, wall, "second occurrence of a repeated local time")
        return first, second
    # spring-forward: this local time does not exist
    if not fixed or rule.dst_skipped is DstSkipped.SKIP:
        return None, None
    jump = _clock_jump(rule.zone, wall - offset_later, wall - offset_earlier)
    return Fire(jump, wall, "local time skipped by DST; fired when the clocks jumped"), None


def _offset_of_wall(zone: ZoneInfo, wall: datetime) -> timedelta:
    """UTC offset of the naive local time `wall` (its `fold` picks the occurrence)."""
    offset = zone.utcoffset(wall)
    assert offset is not None, "a zone always has an offset"
    return offset


class ClockChange(NamedTuple):
    """A change of a zone's UTC offset: at the UTC instant `at`, local clocks showing
    `before` (naive) turn to `after`."""

    at: datetime
    before: datetime
    after: datetime

    @property
    def forward(self) -> bool:
        return self.after > self.before


def next_clock_change(zone: ZoneInfo, now: datetime, days: int = 400) -> ClockChange | None:
    """The zone's first offset change after `now` within `days`; None for a zone without
    one (UTC, most of Asia). Day by day, then to the second."""
    start = now.astimezone(UTC).replace(microsecond=0)
    offset = start.astimezone(zone).utcoffset()
    for day in range(1, days + 1):
        probe = start + timedelta(days=day)
        if probe.astimezone(zone).utcoffset() != offset:
            low, high = probe - timedelta(days=1), probe
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                if middle.astimezone(zone).utcoffset() == offset:
                    low = middle
                else:
                    high = middle
            at = high.replace(microsecond=0)
            after = at.astimezone(zone)
            before = (at - timedelta(seconds=1)).astimezone(zone) + timedelta(seconds=1)
            return ClockChange(at, before.replace(tzinfo=None), after.replace(tzinfo=None))
    return None


@lru_cache(maxsize=8192)
def _near_transition(zone: ZoneInfo, day: date) -> bool:
    """Whether the UTC offset changes between the day before `day` and the day after: only
    then can a local time on `day` be skipped or repeated."""
    probes = (day + timedelta(days=d) for d in (-1, 0, 1, 2))
    return len({zone.utcoffset(datetime.combine(probe, time())) for probe in probes}) > 1


def _offset(aware: datetime) -> timedelta:
    offset = aware.utcoffset()
    assert offset is not None, "an aware datetime has an offset"
    return offset


@lru_cache(maxsize=1024)
def _clock_jump(zone: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The UTC instant of the forward transition between the naive UTC times `low` (before
    it) and `high` (after it), to the second."""
    before = low.replace(tzinfo=UTC).astimezone(zone).utcoffset()
    lo, hi = int(low.replace(tzinfo=UTC).timestamp()), int(high.replace(tzinfo=UTC).timestamp())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return datetime.fromtimestamp(hi, UTC)
