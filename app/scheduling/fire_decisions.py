"""What becomes of a schedule's due fires: pure decisions, no database, no clock.

The trigger locks a due schedule, reads the database's now and the schedule's runs that
are still active, and calls `plan_fires`. The plan says, for every fire that came due, its
outcome in the fire ledger (`schedule_fires`), which runs to create (with their spread
`run_at`), which active runs to cancel, and where `next_fire_time` moves. The trigger
applies it in the transaction that locked the schedule.

Policies, in the order they apply to the fires due since `next_fire_time`:

1. Pause: fires before the pause ends are `paused` (a pause with an expiry resumes itself).
2. Catch-up window: fires older than `now - catchup_window` are `missed`.
3. Catch-up: `latest` (the default) runs the newest due fire only and records the older ones
   as `coalesced` into it; `all` / at most N backfills the newest N (capped by
   `PlanLimits.catchup_max`) oldest first, each with its own `fire_time`; older ones are
   `missed`. The search never walks the whole outage, so a year-long outage on `* * * * *`
   costs the fires kept, not the fires missed.
4. Overlap, decided once per plan against the runs active before it: `skip` (the default)
   records every due fire as `skipped_overlap` while a run is pending or running; `allow`
   ignores active runs; `queue` keeps the newest fire `queued` (at most one) and the trigger
   enqueues it when the active run ends; `cancel` cancels the active runs and enqueues.
   A catch-up is one decision: its backfilled runs are enqueued together.

Individual ledger rows for missed, coalesced and paused fires are capped per plan
(`PlanLimits.ledger_rows`, the newest kept); the oldest listed row counts the rest.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple

from app.scheduling.cron import (
    EPSILON,
    Fire,
    Recurrence,
    count_fires,
    fires_after,
    latest_fires,
    next_fire,
)

DEFAULT_SPREAD_SECONDS = 60
DEFAULT_CATCHUP_MAX = 1000  # most fires one catch-up backfills, whatever the schedule asks
DEFAULT_LEDGER_ROWS = 100  # most rows listed per plan for missed, coalesced or paused fires
DEFAULT_COUNT_CAP = 100_000  # older unlisted fires are counted up to this many


class FireOutcome(StrEnum):
    """What became of one fire of a schedule; one ledger row per (schedule, fire_time)."""

    ENQUEUED = "enqueued"
    """A run was created (`run_id`): by the trigger, by "run now", or on releasing a
    queued fire."""

    QUEUED = "queued"
    """Waiting behind the schedule's active run (overlap `queue`). The trigger moves it to
    `enqueued` once no run of the schedule is pending or running."""

    SKIPPED_OVERLAP = "skipped_overlap"
    """Not run: an earlier run was still pending or running (overlap `skip`, or `queue`
    with a fire already queued)."""

    COALESCED = "coalesced"
    """Missed while no trigger ran, folded into the run of a later fire (catch-up
    `latest`); `run_id` is that run."""

    MISSED = "missed"
    """Missed while no trigger ran and not run: older than the catch-up window, or beyond
    the catch-up limit."""

    PAUSED = "paused"
    """Not run: the schedule was paused."""

    EXCLUDED = "excluded"
    """Not run: the fire fell on a holiday or in a blackout window of the schedule's
    exclusion calendar (`app.scheduling.exclusions`)."""


class OverlapPolicy(StrEnum):
    """What a fire does while an earlier run of its schedule is pending or running."""

    SKIP = "skip"
    """Record the fire as `skipped_overlap`, create no run (the default)."""

    ALLOW = "allow"
    """Create the run anyway."""

    QUEUE = "queue"
    """Keep one fire `queued`; it is enqueued when the active run ends."""

    CANCEL = "cancel"
    """Cancel the active run, then create the new one."""


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """Bounds on one plan, so no outage can make a tick unbounded in time or memory."""

    catchup_max: int = DEFAULT_CATCHUP_MAX
    ledger_rows: int = DEFAULT_LEDGER_ROWS
    count_cap: int = DEFAULT_COUNT_CAP


class DueSchedule(NamedTuple):
    """A schedule as the trigger locked it, reduced to what the policies need.

    (A named tuple, like `Fire`: the trigger makes one per due schedule, and a frozen
    dataclass costs several times more to create.)"""

    id: uuid.UUID
    rule: Recurrence
    next_fire_time: datetime
    active: bool = True
    paused_until: datetime | None = None
    paused_note: str | None = None
    catchup: bool = False
    catchup_limit: int | None = None
    catchup_window: timedelta | None = None
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    spread: timedelta = timedelta(seconds=DEFAULT_SPREAD_SECONDS)  # zero: the exact minute
    has_queued_fire: bool = False


class LedgerEntry(NamedTuple):
    """One fire and its outcome. ENQUEUED entries carry the `run_at` of the run to create;
    COALESCED ones name the fire whose run covers them. (A named tuple: one per fire.)"""

    fire: Fire
    outcome: FireOutcome
    detail: str | None = None
    run_at: datetime | None = None
    coalesced_count: int = 0
    covered_by: datetime | None = None


@dataclass(slots=True)
class Plan:
    entries: list[LedgerEntry] = field(default_factory=list)
    cancel_run_ids: list[int] = field(default_factory=list)
    next_fire_time: datetime | None = None
    resume: bool = False  # the pause expired: make the schedule active again

    @property
    def runs_wanted(self) -> list[LedgerEntry]:
        return [e for e in self.entries if e.outcome is FireOutcome.ENQUEUED]


def spread_offset(schedule_id: uuid.UUID, spread: timedelta) -> timedelta:
    """A stable offset in [0, spread) for this schedule, so that `0 * * * *` across many
    schedules does not start in one second. The same schedule always gets the same one."""
    return timedelta(milliseconds=spread_offset_ms(schedule_id, window_ms(spread)))


def spread_offset_ms(schedule_id: uuid.UUID, window: int) -> int:
    """`spread_offset` in whole milliseconds, for a window of `window` milliseconds."""
    if window <= 0:
        return 0
    digest = hashlib.blake2b(schedule_id.bytes, digest_size=8).digest()
    return int.from_bytes(digest, "big") % window


def window_ms(spread: timedelta) -> int:
    return int(spread.total_seconds() * 1000)


def spread_window(spread: timedelta, fire_time: datetime, following: datetime | None) -> timedelta:
    """The window a fire's spread offset falls in: the schedule's spread, cut to the time
    to its next fire, so a spread wider than the period (60 s on `--every 10`) never makes
    its runs overlap."""
    if following is None:
        return spread
    return min(spread, following - fire_time)


def plan_fires(
    schedule: DueSchedule,
    now: datetime,
    active_run_ids: Sequence[int] = (),
    limits: PlanLimits | None = None,
) -> Plan:
    """Decide every fire of `schedule` due at `now` (see the module docstring)."""
    limits = limits or PlanLimits()
    rule = schedule.rule
    cursor = schedule.next_fire_time
    plan = Plan(next_fire_time=cursor)
    if cursor > now:  # not due: a clock that went back changes nothing
        return plan
    if _single_due_fire(plan, schedule, now, active_run_ids):
        return plan
    due_end = now + EPSILON  # a fire at exactly `now` is due

    if not schedule.active:
        expired = schedule.paused_until is not None and schedule.paused_until <= now
        pause_end = schedule.paused_until if expired and schedule.paused_until else due_end
        note = f"schedule paused: {schedule.paused_note}" if schedule.paused_note else None
        plan.entries += _backlog(rule, cursor, pause_end, FireOutcome.PAUSED, note, limits)[0]
        if not expired:
            plan.next_fire_time = _next_after(rule, now)
            return plan
        plan.resume = True
        cursor = max(cursor, pause_end)

    if schedule.catchup_window is not None and cursor < now - schedule.catchup_window:
        window_start = now - schedule.catchup_window
        reason = f"older than the catch-up window of {_seconds(schedule.catchup_window)}"
        plan.entries += _backlog(rule, cursor, window_start, FireOutcome.MISSED, reason, limits)[0]
        cursor = window_start

    keep = min(schedule.catchup_limit or limits.catchup_max, limits.catchup_max)
    due = latest_fires(rule, cursor, due_end, keep if schedule.catchup else 1)
    plan.next_fire_time = _next_after(rule, now)
    if not due:
        return plan

    coalesced = 0
    if schedule.catchup:
        reason = f"beyond the catch-up limit of {keep} fires"
        plan.entries += _backlog(rule, cursor, due[0].at, FireOutcome.MISSED, reason, limits)[0]
    else:
        reason = f"folded into the fire at {due[0].at:%Y-%m-%d %H:%M:%S} UTC"
        older, coalesced = _backlog(
            rule, cursor, due[0].at, FireOutcome.COALESCED, reason, limits, covered_by=due[0].at
        )
        plan.entries += older

    _apply_overlap(plan, schedule, due, active_run_ids, coalesced)
    return plan


def _single_due_fire(
    plan: Plan, schedule: DueSchedule, now: datetime, active_run_ids: Sequence[int]
) -> bool:
    """The usual tick: an active schedule with exactly one fire due, inside any catch-up
    window. Two fire searches instead of the general path's backlog searches."""
    if not schedule.active:
        return False
    fire, following = _fire_at_and_after(schedule.rule, schedule.next_fire_time)
    if fire is None or fire.at > now:
        return False
    if schedule.catchup_window is not None and fire.at < now - schedule.catchup_window:
        return False
    if following is not None and following.at <= now:
        return False
    plan.next_fire_time = following.at if following else None
    _apply_overlap(plan, schedule, [fire], active_run_ids, coalesced=0)
    return True


@lru_cache(maxsize=4096)
def _fire_at_and_after(rule: Recurrence, cursor: datetime) -> tuple[Fire | None, Fire | None]:
    """The fire at `cursor` (or the first after it) and the one after that. Cached: at the
    top of the hour thousands of schedules share a rule and a cursor."""
    fires = fires_after(rule, cursor - EPSILON)
    return next(fires, None), next(fires, None)


def _apply_overlap(
    plan: Plan,
    schedule: DueSchedule,
    due: list[Fire],
    active_run_ids: Sequence[int],
    coalesced: int,
) -> None:
    policy = schedule.overlap
    blocked = bool(active_run_ids) and policy is not OverlapPolicy.ALLOW
    if not blocked and not coalesced and len(due) == 1:  # the usual tick: one run to create
        fire = due[0]
        run_at = fire.at + _offset(schedule, fire.at, plan.next_fire_time)
        plan.entries.append(
            LedgerEntry(fire, FireOutcome.ENQUEUED, fire.note or None, run_at=run_at)
        )
        return
    running = ", ".join(str(i) for i in active_run_ids)
    entries: list[LedgerEntry] = []
    followers = [f.at for f in due[1:]] + [plan.next_fire_time]
    for fire, following in zip(due, followers, strict=True):
        if not blocked or policy is OverlapPolicy.CANCEL:
            run_at = fire.at + _offset(schedule, fire.at, following)
            entries.append(_entry(fire, FireOutcome.ENQUEUED, None, run_at=run_at))
        else:
            reason = f"run {running} of this schedule was still pending or running"
            entries.append(_entry(fire, FireOutcome.SKIPPED_OVERLAP, reason))
    if blocked and policy is OverlapPolicy.QUEUE:
        newest = entries[-1]
        if schedule.has_queued_fire:
            entries[-1] = newest._replace(detail=f"{newest.detail}; a fire is already queued")
        else:
            reason = f"queued behind run {running}"
            entries[-1] = _entry(newest.fire, FireOutcome.QUEUED, reason)
    if blocked and policy is OverlapPolicy.CANCEL:
        plan.cancel_run_ids = list(active_run_ids)
        reason = f"cancelled the previous run {running}"
        entries = [e._replace(detail=_join(e.detail, reason)) for e in entries]
    if coalesced:
        entries[-1] = entries[-1]._replace(coalesced_count=coalesced)
    plan.entries += entries


def _offset(schedule: DueSchedule, fire_time: datetime, following: datetime | None) -> timedelta:
    return spread_offset(schedule.id, spread_window(schedule.spread, fire_time, following))


def _backlog(
    rule: Recurrence,
    start: datetime,
    end: datetime,
    outcome: FireOutcome,
    reason: str | None,
    limits: PlanLimits,
    *,
    covered_by: datetime | None = None,
) -> tuple[list[LedgerEntry], int]:
    """Ledger entries for the fires in [start, end), the newest `limits.ledger_rows` of
    them listed, and how many fires there were in all."""
    listed = latest_fires(rule, start, end, limits.ledger_rows)
    if not listed:
        return [], 0
    entries = [_entry(f, outcome, reason, covered_by=covered_by) for f in listed]
    unlisted, exact = count_fires(rule, start, listed[0].at, limits.count_cap)
    if unlisted:
        more = f"{unlisted}{'' if exact else '+'} earlier fires since {start:%Y-%m-%d %H:%M} UTC"
        entries[0] = entries[0]._replace(detail=_join(entries[0].detail, f"and {more}"))
    return entries, len(listed) + unlisted


def _entry(
    fire: Fire,
    outcome: FireOutcome,
    reason: str | None,
    *,
    run_at: datetime | None = None,
    covered_by: datetime | None = None,
) -> LedgerEntry:
    return LedgerEntry(
        fire, outcome, _join(fire.note, reason), run_at=run_at, covered_by=covered_by
    )


def _next_after(rule: Recurrence, now: datetime) -> datetime | None:
    fire = next_fire(rule, now)
    return fire.at if fire else None


def _join(*parts: str | None) -> str | None:
    text = "; ".join(p for p in parts if p)
    return text or None


def _seconds(span: timedelta) -> str:
    return f"{span.total_seconds():g}s"
