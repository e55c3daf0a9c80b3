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

import heapq
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import NamedTuple
from zoneinfo import ZoneInfo

from app.core.limits import LATEST
from app.scheduling.cron_expressions import SEARCH_SPAN, CronExpression, RecurrenceError, parse_cron
from app.scheduling.zones import clock_jump, near_transition, utc_offset, zone_named

EPSILON = timedelta(microseconds=1)
ZERO = timedelta(0)
FIRST_LOOKBACK = timedelta(minutes=2)  # `latest_fires` looks this far back first, then 4x


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
    if local_after.fold == 0 and near_transition(zone, wall.date()):
        repeated_span = utc_offset(local_after) - utc_offset(local_after.replace(fold=1))
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
    if not near_transition(zone, wall.date()):
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
    jump = clock_jump(rule.zone, wall - offset_later, wall - offset_earlier)
    return Fire(jump, wall, "local time skipped by DST; fired when the clocks jumped"), None


def _offset_of_wall(zone: ZoneInfo, wall: datetime) -> timedelta:
    """UTC offset of the naive local time `wall` (its `fold` picks the occurrence)."""
    offset = zone.utcoffset(wall)
    assert offset is not None, "a zone always has an offset"
    return offset
