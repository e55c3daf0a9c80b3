"""Upcoming fires of every schedule, read from the database: the 24-hour load forecast
and the week calendar (the pure counting is `app.scheduling.forecast`).

    forecast = forecast_with(conn, extra_fire_times, zone="Europe/Berlin")
    forecast.counts[m], forecast.extra[m]  # fires of all schedules / of the edited one
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from time import monotonic
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from app.core.db import Conn
from app.core.sql import query
from app.scheduling import calendars, forecast
from app.scheduling.cron import Recurrence, fires_between
from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.exclusions import excluded_reason
from app.scheduling.forecast import Day
from app.scheduling.schedule_rules import db_now, recurrence_of
from app.scheduling.zones import zone_named

BUSIEST_SHOWN = 5
WEEK_SCHEDULES_SHOWN = 300  # the week calendar lists at most this many schedules

# Reading ten thousand schedules is most of a forecast or week page, and they change
# rarely: what was computed is kept per process for KEPT_SECONDS under what was asked and
# the schedules' and calendars' edit mark, so an edit shows at once; a change the trigger
# makes (an automatic pause or resume) shows within KEPT_SECONDS.
KEPT_SECONDS = 30.0
KEPT_ENTRIES = 256
_kept: dict[tuple[Any, ...], tuple[float, Any]] = {}
T = TypeVar("T")


def _remembered(conn: Conn, asked: tuple[Any, ...], compute: Callable[[], T]) -> T:
    mark = conn.execute(query("upcoming", "upcoming_edit_mark")).fetchone()
    marks = mark.values() if isinstance(mark, dict) else mark or ()
    key = (conn.info.host, conn.info.port, conn.info.dbname, *asked, *marks)
    hit = _kept.get(key)
    if hit is not None and monotonic() - hit[0] < KEPT_SECONDS:
        return hit[1]  # type: ignore[no-any-return]
    value = compute()
    if len(_kept) >= KEPT_ENTRIES:
        _kept.clear()  # whole entries only: safe with the web's threads
    _kept[key] = (monotonic(), value)
    return value


@dataclass(frozen=True, slots=True)
class Forecast:
    """Fires per minute for 24 hours from `start` (UTC, the top of an hour in `zone`)."""

    start: datetime
    zone: ZoneInfo
    counts: list[int]  # all schedules (but the one being edited)
    extra: list[int] = field(default_factory=lambda: [0] * forecast.MINUTES)
    schedules: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts) + sum(self.extra)

    def busiest(self, n: int = BUSIEST_SHOWN) -> list[tuple[datetime, int]]:
        both = [a + b for a, b in zip(self.counts, self.extra, strict=True)]
        return forecast.busiest(both, self.start, n)


def window_start(now: datetime, zone: ZoneInfo) -> datetime:
    """The top of the current hour on the viewer's clock, in UTC."""
    local = now.astimezone(zone)
    return local.replace(minute=0, second=0, microsecond=0).astimezone(UTC)


def _rules(rows: Sequence[Mapping[str, Any]]) -> list[Recurrence]:
    rules = []
    for row in rows:
        try:
            rules.append(recurrence_of(row))
        except RecurrenceError:  # the trigger stops such a schedule; nothing to forecast
            continue
    return rules


def _schedules(
    conn: Conn, until: datetime, *, search: str | None = None, excluding: str | None = None
) -> list[dict[str, Any]]:
    params = {"until": until, "search": search or None, "excluding": excluding}
    return conn.execute(query("upcoming", "upcoming_schedules"), params).fetchall()


def forecast_with(
    conn: Conn,
    extra_fire_times: Sequence[datetime] = (),
    *,
    zone: str = "UTC",
    excluding: str | None = None,
    now: datetime | None = None,
) -> Forecast:
    """Fires per minute over the next 24 hours of every active schedule (but `excluding`,
    the schedule being edited), and apart from them `extra_fire_times` (its fires)."""
    tz = zone_named(zone)
    start = window_start(db_now(conn, now), tz)
    end = start + forecast.WINDOW

    def counted() -> tuple[list[int], int]:
        rows = _schedules(conn, end, excluding=excluding)
        return forecast.minute_counts(forecast.grouped(_rules(rows), start, end), start), len(rows)

    counts, schedules = _remembered(conn, ("forecast", start, excluding), counted)
    extra = forecast.minutes_of(extra_fire_times, start)
    return Forecast(start, tz, counts, extra, schedules)


def fire_times(rule: Recurrence, start: datetime) -> list[datetime]:
    """A rule's fires in the 24 hours from `start` (the schedule being edited)."""
    fires = fires_between(rule, start, start + forecast.WINDOW)
    return [f.at for f in itertools.islice(fires, forecast.FIRE_CAP)]


# ---- the week calendar ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WeekRow:
    """One schedule in the week: what it is and its fires on each of the 7 days."""

    name: str
    target: str | None
    cron: str | None
    interval_seconds: int | None
    timezone: str
    days: list[Day]
    # Per day, per fire time: why its exclusion calendar stops it (None: it runs).
    excluded: list[list[str | None]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Week:
    monday: date
    zone: ZoneInfo
    days: list[date]
    rows: list[WeekRow]
    more: int  # schedules matching but not shown


def monday_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


def week(
    conn: Conn,
    monday: date | None = None,
    *,
    zone: str = "UTC",
    search: str | None = None,
    now: datetime | None = None,
) -> Week:
    """Each active schedule's fires (or bands) on the 7 days from `monday` (this week's by
    default) on the viewer's clock in `zone`."""
    tz = zone_named(zone)
    if monday is None:
        monday = monday_of(db_now(conn, now).astimezone(tz).date())
    chosen = monday
    return _remembered(
        conn, ("week", chosen, zone, search), lambda: _week(conn, chosen, tz, search)
    )


def _week(conn: Conn, monday: date, tz: ZoneInfo, search: str | None) -> Week:
    days = [monday + timedelta(days=d) for d in range(7)]
    bounds = [(_midnight(day, tz), _midnight(day + timedelta(days=1), tz)) for day in days]
    rows = _schedules(conn, bounds[-1][1], search=search)
    shown = rows[:WEEK_SCHEDULES_SHOWN]
    computed: dict[Recurrence, list[Day]] = {}
    found = calendars.load_many(conn, {r["calendar_id"] for r in shown if r["calendar_id"]})
    out = []
    for row in shown:
        try:
            rule = forecast.without_idle_bounds(recurrence_of(row), bounds[0][0], bounds[-1][1])
        except RecurrenceError:
            continue
        if rule not in computed:
            computed[rule] = forecast.days_of(rule, bounds)
        calendar = found.get(row["calendar_id"])
        excluded = [
            [excluded_reason(calendar, at, rule.zone) for at in day.times] for day in computed[rule]
        ]
        out.append(
            WeekRow(
                row["name"], row["target"], row["cron"], row["interval_seconds"],
                row["timezone"], computed[rule], excluded,
            )
        )  # fmt: skip
    return Week(monday, tz, days, out, len(rows) - len(shown))


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(), zone).astimezone(UTC)
