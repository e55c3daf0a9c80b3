"""Exclusion calendars, pure: is a fire on a public holiday or inside a blackout window?

A calendar names a country (and optionally a subdivision) whose public holidays come from
the maintained `holidays` library, and blackout windows ("quarter close"). A holiday
excludes the whole local day in the *schedule's* zone: a fire at 23:30 UTC on 24 Dec is on
25 Dec in Auckland. A blackout window excludes the instants in [start, end).

Nothing here reads a clock or a database; `app.scheduling.calendars` loads calendars, the trigger
(`app.scheduling.fire_batches`) applies `exclude` to each plan, and the schedule preview can cross
out fires with `excluded_reason`:

    >>> cal = Calendar("NZ", country="NZ")
    >>> excluded_reason(cal, datetime(2026, 12, 24, 23, 30, tzinfo=UTC), "Pacific/Auckland")
    'public holiday in NZ: Christmas Day'
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from app.scheduling.fire_decisions import FireOutcome, Plan
from app.scheduling.zones import zone_named

# Holiday names are shown to people in English where the library has them.
HOLIDAY_LANGUAGE = "en_US"
# Outcomes that would have run something: those are the ones a calendar turns into
# `excluded`. Paused, missed, coalesced and skipped fires ran nothing anyway.
_WOULD_RUN = frozenset({FireOutcome.ENQUEUED, FireOutcome.QUEUED})


@dataclass(frozen=True, slots=True)
class Blackout:
    """A window in which nothing of the calendar's schedules runs: [starts_at, ends_at)."""

    name: str
    starts_at: datetime
    ends_at: datetime


@dataclass(frozen=True, slots=True)
class Calendar:
    """An exclusion calendar as the trigger and the preview use it."""

    name: str
    country: str | None = None
    subdivision: str | None = None
    blackouts: tuple[Blackout, ...] = ()
    id: uuid.UUID | None = None


def supported_countries() -> Mapping[str, list[str]]:
    """Country codes the holidays library knows, each with its subdivision codes."""
    return _supported()


@lru_cache(maxsize=1)
def country_names() -> dict[str, str]:
    """`{"DE": "Germany", ...}` for the countries the holidays library knows."""
    try:
        from holidays import registry  # where the library lists its countries' names

        named = {
            entry[1]: key.replace("_", " ").title() for key, entry in registry.COUNTRIES.items()
        }
    except (ImportError, AttributeError, IndexError):  # a later release may move it
        named = {}
    return {code: named.get(code, code) for code in _supported()}


@lru_cache(maxsize=1)
def _supported() -> dict[str, list[str]]:
    import holidays  # here, not at the top: 0.05-0.2 s of every web and trigger start

    return {
        code: list(subdivisions)
        for code, subdivisions in holidays.list_supported_countries().items()
    }


@lru_cache(maxsize=1024)
def holidays_of(country: str, subdivision: str | None, year: int) -> Mapping[date, str]:
    """The public holidays of one year, by local date (cached: the trigger asks per tick)."""
    import holidays

    found = holidays.country_holidays(
        country, subdiv=subdivision, years=year, language=HOLIDAY_LANGUAGE
    )
    return dict(found.items())


def holiday_on(calendar: Calendar, day: date) -> str | None:
    """The name of the calendar's public holiday on `day`, if it is one."""
    if calendar.country is None:
        return None
    return holidays_of(calendar.country, calendar.subdivision, day.year).get(day)


def excluded_reason(
    calendar: Calendar | None, fire_time_utc: datetime, zone: ZoneInfo | str
) -> str | None:
    """Why a fire at `fire_time_utc` of a schedule in `zone` does not run, or None when it
    runs: a blackout window containing the instant, or a holiday on its local day."""
    if calendar is None:
        return None
    for window in calendar.blackouts:
        if window.starts_at <= fire_time_utc < window.ends_at:
            return f"in the blackout window {window.name!r}"
    if calendar.country is None:
        return None
    tz = zone_named(zone) if isinstance(zone, str) else zone
    name = holiday_on(calendar, fire_time_utc.astimezone(tz).date())
    if name is None:
        return None
    where = calendar.country + (f"-{calendar.subdivision}" if calendar.subdivision else "")
    return f"public holiday in {where}: {name}"


def exclude(plan: Plan, calendar: Calendar, zone: ZoneInfo) -> Plan:
    """The plan with every fire that would have run inside `calendar` recorded as
    `excluded` instead. Fires coalesced into an excluded fire say that nothing ran for
    them. When no run is left to create, the overlap policy `cancel` cancels nothing
    either: an excluded fire must not stop a run that is under way."""
    changed = False
    entries = []
    stopped: set[datetime] = set()
    for entry in plan.entries:
        reason = None
        if entry.outcome in _WOULD_RUN:
            reason = excluded_reason(calendar, entry.fire.at, zone)
        if reason is None:
            entries.append(entry)
            continue
        changed = True
        stopped.add(entry.fire.at)
        detail = f"{reason} (calendar {calendar.name!r})"
        if entry.fire.note:
            detail = f"{entry.fire.note}; {detail}"
        entries.append(entry._replace(outcome=FireOutcome.EXCLUDED, detail=detail, run_at=None))
    if not changed:
        return plan
    entries = [
        e._replace(covered_by=None, detail=f"{e.detail}; that fire was excluded, so none ran")
        if e.outcome is FireOutcome.COALESCED and e.covered_by in stopped
        else e
        for e in entries
    ]
    runs_left = any(e.outcome is FireOutcome.ENQUEUED for e in entries)
    return replace(plan, entries=entries, cancel_run_ids=plan.cancel_run_ids if runs_left else [])
