"""When schedules will fire, pure: the 24-hour load forecast and the week calendar.

Both are projections of the recurrence math in `app.scheduling.cron` (nothing here re-implements a
cron): the load forecast counts fires per minute across every schedule for the next 24
hours, the week calendar lists each schedule's fires per day, or a band ("every 5 min")
for a schedule that fires more than `BAND_OVER` times that day.

Work is bounded so 10,000 schedules stay fast: schedules that do the same inside the
window (the same cron and zone; intervals whose fires land on the same seconds) are
computed once and counted many times, a cron yields at most `FIRE_CAP` fires per window,
an interval's fires are its first fire plus steps (no search per fire), and counts live in
one list of 1,440 integers, not in objects per fire.

    counts = minute_counts([(rule, 3)], start)  # three schedules with that rule
    busiest(counts, start, 5)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from app.scheduling.cron import EPSILON, Recurrence, count_fires, fires_between, next_fire

MINUTES = 24 * 60
WINDOW = timedelta(minutes=MINUTES)
# A cron fires at most once a minute, plus once more per minute of a repeated DST hour:
# no rule has more fires in a day than this, so the cap never cuts a cron short.
FIRE_CAP = MINUTES + 60
BAND_OVER = 12  # fires in a day above which the week calendar shows a band (hourly is one)
SECONDS_PER_MINUTE = 60
STEPS_CAP = 24 * 3600  # an interval of one second fires this often in a day


@dataclass(frozen=True, slots=True)
class Steps:
    """An interval rule inside one window: `count` fires, the first `first` seconds after
    the window's start, then one every `every` seconds. Interval schedules whose anchors
    differ but whose fires land on the same seconds of the window are one `Steps`."""

    first: float
    every: float
    count: int


Pattern = Recurrence | Steps


def pattern(rule: Recurrence, start: datetime, end: datetime) -> Pattern | None:
    """What `rule` does inside [start, end), reduced so that schedules doing the same share
    one computation: a cron without the bounds that do not matter there, an interval as its
    first fire and count (from `app.scheduling.cron`). None when it does not fire in the window."""
    if rule.interval is None:
        return without_idle_bounds(rule, start, end)
    first = next_fire(rule, start - EPSILON)
    if first is None or first.at >= end:
        return None
    count, _ = count_fires(rule, start, end, STEPS_CAP)
    return Steps((first.at - start).total_seconds(), rule.interval.total_seconds(), count)


def without_idle_bounds(rule: Recurrence, start: datetime, end: datetime) -> Recurrence:
    """A cron rule without the start and end that do not matter inside [start, end)."""
    if rule.interval is not None:
        return rule  # an interval's start is its anchor: it always matters
    if rule.start is not None and rule.start <= start:
        rule = replace(rule, start=None)
    if rule.end is not None and rule.end >= end:
        rule = replace(rule, end=None)
    return rule


def grouped(
    rules: Iterable[Recurrence], start: datetime, end: datetime
) -> list[tuple[Pattern, int]]:
    """Each distinct pattern in the window with how many schedules have it."""
    counted: dict[Pattern, int] = {}
    for rule in rules:
        key = pattern(rule, start, end)
        if key is not None:
            counted[key] = counted.get(key, 0) + 1
    return list(counted.items())


def fire_minutes(key: Pattern, start: datetime) -> list[int]:
    """The minute (0..1439 after `start`) of each fire in the 24 hours from `start`; a
    minute appears once per fire in it. A cron yields at most `FIRE_CAP` fires."""
    if isinstance(key, Steps):
        return [int((key.first + k * key.every) // SECONDS_PER_MINUTE) for k in range(key.count)]
    end = start + WINDOW
    return [
        int((fire.at - start).total_seconds()) // SECONDS_PER_MINUTE
        for fire in itertools.islice(fires_between(key, start, end), FIRE_CAP)
    ]


def minute_counts(rules: Sequence[tuple[Pattern, int]], start: datetime) -> list[int]:
    """Fires per minute in the 24 hours from `start`, over `(pattern, how many schedules)`."""
    counts = [0] * MINUTES
    for rule, times in rules:
        for m in fire_minutes(rule, start):
            counts[m] += times
    return counts


def minutes_of(instants: Iterable[datetime], start: datetime) -> list[int]:
    """Fires per minute of a list of fire times (the schedule being edited)."""
    counts = [0] * MINUTES
    for at in instants:
        m = int((at - start).total_seconds()) // SECONDS_PER_MINUTE
        if 0 <= m < MINUTES:
            counts[m] += 1
    return counts


def busiest(counts: Sequence[int], start: datetime, n: int) -> list[tuple[datetime, int]]:
    """The `n` minutes with the most fires (earliest first among equals), busiest first."""
    ranked = sorted((m for m, c in enumerate(counts) if c), key=lambda m: (-counts[m], m))
    return [(start + timedelta(minutes=m), counts[m]) for m in ranked[:n]]


# ---- the week calendar ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Day:
    """One schedule's fires on one day: their instants, or a band with how many there are
    when they are more than `BAND_OVER`."""

    times: tuple[datetime, ...] = ()
    band: int = 0  # fires that day when shown as a band, else 0


def days_of(rule: Recurrence, bounds: Sequence[tuple[datetime, datetime]]) -> list[Day]:
    """A rule's fires in each [start, end) of `bounds` (the days of a week)."""
    days = []
    for start, end in bounds:
        first = list(itertools.islice(fires_between(rule, start, end), BAND_OVER + 1))
        if len(first) <= BAND_OVER:
            days.append(Day(times=tuple(f.at for f in first)))
        else:
            days.append(Day(band=count_fires(rule, start, end, FIRE_CAP * 10)[0]))
    return days
