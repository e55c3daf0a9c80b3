"""When schedules will fire, pure: the 24-hour load forecast and the week calendar.

Both are projections of the recurrence math in `app.cron` (nothing here re-implements a
cron): the load forecast counts fires per minute across every schedule for the next 24
hours, the week calendar lists each schedule's fires per day, or a band ("every 5 min")
for a schedule that fires more than `BAND_OVER` times that day.

Work is bounded so 10,000 schedules stay fast: schedules that share a rule (the same cron
and zone, or the same interval and anchor) are computed once and counted many times, each
rule yields at most `FIRE_CAP` fires per window, and counts live in one list of 1,440
integers, not in objects per fire.

    counts = minute_counts([(rule, 3)], start)  # three schedules with that rule
    busiest(counts, start, 5)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from app.cron import Recurrence, count_fires, fires_between

MINUTES = 24 * 60
WINDOW = timedelta(minutes=MINUTES)
# A cron fires at most once a minute, plus once more per minute of a repeated DST hour:
# no rule has more fires in a day than this, so the cap never cuts a cron short.
FIRE_CAP = MINUTES + 60
BAND_OVER = 24  # fires in a day above which the week calendar shows a band
SECONDS_PER_MINUTE = 60


def window_rule(rule: Recurrence, start: datetime, end: datetime) -> Recurrence:
    """The rule with bounds that do not matter inside [start, end) removed, so schedules
    that differ only in a long-past start or a far end share one computation."""
    if rule.interval is not None:
        return rule  # the start is the interval's anchor: it always matters
    if rule.start is not None and rule.start <= start:
        rule = replace(rule, start=None)
    if rule.end is not None and rule.end >= end:
        rule = replace(rule, end=None)
    return rule


def grouped(
    rules: Iterable[Recurrence], start: datetime, end: datetime
) -> list[tuple[Recurrence, int]]:
    """Each distinct rule (for the window) with how many schedules have it."""
    counted: dict[Recurrence, int] = {}
    for rule in rules:
        key = window_rule(rule, start, end)
        counted[key] = counted.get(key, 0) + 1
    return list(counted.items())


def fire_minutes(rule: Recurrence, start: datetime) -> list[int]:
    """The minute (0..1439 after `start`) of each fire of `rule` in the 24 hours from
    `start`; a minute appears once per fire in it. At most `FIRE_CAP` fires, except for a
    sub-minute interval, which is counted per minute from its arithmetic."""
    end = start + WINDOW
    if rule.interval is not None and rule.interval.total_seconds() < SECONDS_PER_MINUTE:
        return _sub_minute_interval(rule, start)
    return [
        int((fire.at - start).total_seconds()) // SECONDS_PER_MINUTE
        for fire in itertools.islice(fires_between(rule, start, end), FIRE_CAP)
    ]


def _sub_minute_interval(rule: Recurrence, start: datetime) -> list[int]:
    """Every 10 s fires 8,640 times a day: its minutes come from `count_fires` (constant
    time per minute for an interval) instead of one step per fire."""
    minutes: list[int] = []
    minute = timedelta(minutes=1)
    for m in range(MINUTES):
        at = start + m * minute
        n, _ = count_fires(rule, at, at + minute, SECONDS_PER_MINUTE * 1000)
        minutes.extend([m] * n)
    return minutes


def minute_counts(rules: Sequence[tuple[Recurrence, int]], start: datetime) -> list[int]:
    """Fires per minute in the 24 hours from `start`, over `(rule, how many schedules)`."""
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
