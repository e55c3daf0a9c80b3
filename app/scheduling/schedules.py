"""Schedule operations for people (the CLI now, the dashboard later).

Create (with validation), pause, resume, run now, delete, list, and read the fire ledger.
Each operation is one transaction that locks the schedule row, so it never interleaves with
a trigger firing the same schedule. Bad input raises `ScheduleError` with one sentence;
nothing is written then.

    with transaction(url) as conn:
        created = create_schedule(conn, ScheduleSpec("nightly", cron="30 2 * * *",
                                                     timezone="Europe/Berlin", handler="noop"))
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from app.core import limits
from app.core.db import Conn
from app.core.errors import Conflict, Missing, UsageError
from app.core.name_pages import NamePage, page_by_name
from app.core.sql import like_literal, query
from app.handlers import handler_args, worker_registry
from app.handlers.builtin import BUILTINS
from app.handlers.execution_models import ExecutionModel
from app.handlers.gate import refuse_disabled_handlers
from app.people import audit, versions
from app.runs import run_inserts
from app.scheduling.cron import (
    EPSILON,
    ClockChange,
    DstRepeated,
    DstSkipped,
    Fire,
    Recurrence,
    RecurrenceError,
    fire_past_latest,
    fires_after,
    next_clock_change,
    next_fire,
    parse_cron,
    zone_named,
)
from app.scheduling.fire_decisions import DEFAULT_SPREAD_SECONDS, FireOutcome, OverlapPolicy

# Re-exported: the CLI and the reaper read the database clock as `schedules.db_now`.
from app.scheduling.firing import (
    FireRecord,
    Start,
    Started,
    db_now,
    record_fires,
    recurrence_of,
    start_fires,
    workflow_shapes,
)

MAX_NAME_LENGTH = limits.MAX_NAME_LENGTH
DEFAULT_FIRES_SHOWN = 50
# Who a change is recorded as when the caller does not say (scripts, tests); the CLI passes
# `audit.cli_actor()` and the dashboard the signed-in person.
SYSTEM_ACTOR = "system"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ScheduleError(UsageError):
    """A schedule operation cannot be done as asked; the message says why."""


class ScheduleConflict(ScheduleError, Conflict):
    """The name asked for is taken."""


class TargetMissing(ScheduleError, Missing):
    """The job definition or workflow a schedule should run does not exist."""


class NoSuchCalendar(ScheduleError):
    """The exclusion calendar asked for does not exist (or no longer does)."""


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """What a person asks for: when it fires, its policies, and what it runs — a new job
    definition made from `handler` and its settings, an existing one (`job`), or a
    workflow (`workflow`: each fire is one DAG run)."""

    name: str
    cron: str | None = None
    every_seconds: int | None = None
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    catchup: bool = False
    catchup_limit: int | None = None
    catchup_window_seconds: int | None = None
    exact_minute: bool = False
    spread_seconds: int = DEFAULT_SPREAD_SECONDS
    dst_skipped: DstSkipped = DstSkipped.SHIFT
    dst_repeated: DstRepeated = DstRepeated.FIRST
    auto_pause_after: int | None = None
    job: str | None = None
    workflow: str | None = None
    handler: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    execution_model: str = ExecutionModel.ASYNC.value
    priority: int = run_inserts.DEFAULT_PRIORITY
    timeout_seconds: int = run_inserts.DEFAULT_TIMEOUT_SECONDS
    max_retries: int = run_inserts.DEFAULT_MAX_RETRIES


@dataclass(frozen=True, slots=True)
class Created:
    id: uuid.UUID
    next_fire_time: datetime
    warnings: list[str]


def parse_catchup(text: str) -> tuple[bool, int | None]:
    """`latest` -> (False, None); `all` -> (True, None); `N` -> (True, N)."""
    value = text.strip().lower()
    if value == "latest":
        return False, None
    if value == "all":
        return True, None
    if value.isascii() and value.isdigit() and int(value) > 0:
        with limits.refused_as(ScheduleError):
            return True, limits.check_whole("the catch-up limit", int(value), 1, limits.MAX_COUNT)
    raise ScheduleError(f"catch-up must be latest, all or a positive number of fires, not {text!r}")


def parse_when(text: str, zone_name: str, now: datetime) -> datetime:
    """An instant from `2030-01-31T09:00` (local to the schedule's zone), an ISO time with an
    offset, or a duration from now like `90m`, `2h`, `3d`."""
    text = text.strip()
    duration = _DURATION.match(text.lower())
    if duration:
        seconds = float(duration[1]) * _DURATION_UNITS[duration[2]]
        try:
            moment = now + timedelta(seconds=seconds)
        except OverflowError:
            raise ScheduleError(
                f"{text} from now lies past {limits.LATEST:%Y-%m-%d}, the latest supported time"
            ) from None
        with limits.refused_as(ScheduleError):
            return limits.check_instant(text, moment)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ScheduleError(
            f"{text!r} is not a time: use 2030-01-31T09:00 (in the schedule's time zone), "
            f"an ISO time with an offset, or a duration like 90m, 2h, 3d"
        ) from None
    if moment.tzinfo is not None:
        with limits.refused_as(ScheduleError):
            return limits.check_instant(text, moment).astimezone(UTC)
    try:
        zone = zone_named(zone_name)
    except RecurrenceError as exc:
        raise ScheduleError(str(exc)) from None
    local = moment.replace(tzinfo=zone)
    try:
        exists = local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == moment
    except OverflowError:  # year 1 or 9999 in a zone off UTC
        exists = True  # refused just below, as outside the supported range
    if not exists:
        raise ScheduleError(f"{text} does not exist in {zone_name} (the clocks jump over it)")
    with limits.refused_as(ScheduleError):
        return limits.check_instant(text, local).astimezone(UTC)


# ---- create ------------------------------------------------------------------------------


def create_schedule(
    conn: Conn, spec: ScheduleSpec, now: datetime | None = None, *, actor: str = SYSTEM_ACTOR
) -> Created:
    """Validate `spec` and create the schedule (and its job definition, given a handler)."""
    with conn.transaction():
        created_at = db_now(conn, now)
        warnings = _validate_fields(spec)
        row = _schedule_row(spec, created_at)
        rule = recurrence_of(row)
        first = next_fire(rule, created_at)
        if first is None:
            raise ScheduleError(_never_fires(spec, rule, created_at))
        if conn.execute(query("schedules", "schedule_by_name"), {"name": spec.name}).fetchone():
            raise ScheduleConflict(f"a schedule named {spec.name!r} already exists")
        target, job_warnings = _target_for(conn, spec, now)
        refuse_disabled_handlers(conn, job_id=target["job_id"], workflow_id=target["workflow_id"])
        row.update(target, next_fire_time=first.at)
        if conn.execute(query("schedules", "schedule_insert"), row).fetchone() is None:
            raise ScheduleConflict(f"a schedule named {spec.name!r} already exists")
        after = snapshot_of(conn, spec.name)
        audit.record(conn, actor, "schedule.create", "schedule", spec.name, after=after,
                     subject_id=row["id"])  # fmt: skip
    return Created(row["id"], first.at, warnings + job_warnings)


@dataclass(frozen=True, slots=True)
class Updated:
    next_fire_time: datetime | None
    changed: list[str]  # the columns whose value changed
    warnings: list[str]


# What `update_schedule` may change: when a schedule fires and its policies. What it runs
# is its job definition's or workflow's business.
EDITABLE = frozenset(
    {
        "cron",
        "every_seconds",
        "timezone",
        "start_at",
        "end_at",
        "overlap",
        "catchup",
        "catchup_limit",
        "catchup_window_seconds",
        "exact_minute",
        "spread_seconds",
        "dst_skipped",
        "dst_repeated",
        "auto_pause_after",
    }
)
# `update_schedule` also changes the exclusion calendar a schedule names (by its name).
CALENDAR = "calendar"
# Columns of the rule itself: changing one recomputes the next fire.
_RULE_COLUMNS = frozenset(
    {"cron", "interval_seconds", "timezone", "start_at", "end_at", "dst_skipped", "dst_repeated"}
)


def update_schedule(
    conn: Conn,
    name: str,
    changes: Mapping[str, Any],
    now: datetime | None = None,
    *,
    actor: str = SYSTEM_ACTOR,
    action: str = "schedule.update",
) -> Updated:
    """Change when schedule `name` fires or its policies, validated like a new schedule.

    A changed rule (cron or interval, zone, bounds, DST options) applies from now: the next
    fire is the new rule's first after now, and fires the old rule had due but not yet
    made are not made. Policies alone leave the next fire where it is. A paused schedule
    stays paused; the ledger is kept."""
    unknown = sorted(set(changes) - EDITABLE - {CALENDAR})
    if unknown:
        raise ScheduleError(f"a schedule's {', '.join(unknown)} cannot be changed here")
    timing = {k: v for k, v in changes.items() if k != CALENDAR}
    with conn.transaction():
        row = _lock(conn, name)
        before = snapshot_of(conn, name)
        refuse_disabled_handlers(conn, job_id=row["job_id"], workflow_id=row["workflow_id"])
        at = db_now(conn, now)
        spec = replace(_spec_of(row), **timing)
        if changes.get("cron") is not None:
            spec = replace(spec, every_seconds=None)
        if changes.get("every_seconds") is not None:
            spec = replace(spec, cron=None)
        warnings = _validate_fields(spec)
        new = _schedule_row(spec, row["created_at"])
        del new["id"], new["created_at"]
        changed = [column for column, value in new.items() if value != row[column]]
        next_fire_time = row["next_fire_time"]
        if _RULE_COLUMNS.intersection(changed):
            rule = recurrence_of({**row, **new})
            first = next_fire(rule, at)
            if first is None:
                raise ScheduleError(_never_fires(spec, rule, at))
            next_fire_time = first.at
        if changed:
            params = {**new, "id": row["id"], "next_fire_time": next_fire_time, "now": now}
            conn.execute(query("schedules", "schedule_update"), params)
        if CALENDAR in changes and _set_calendar(conn, row, changes[CALENDAR], now):
            changed.append(CALENDAR)
        if changed:
            after = snapshot_of(conn, name)
            audit.record(conn, actor, action, "schedule", name, before=before, after=after,
                         subject_id=row["id"])  # fmt: skip
    return Updated(next_fire_time, changed, warnings)


def _set_calendar(
    conn: Conn, row: Mapping[str, Any], calendar: str | None, now: datetime | None
) -> bool:
    """Make the (locked) schedule `row` name exclusion calendar `calendar` (None: none);
    False when it already did."""
    calendar_id = None
    if calendar is not None:
        found = conn.execute(query("calendars", "calendar_by_name"), {"name": calendar})
        named = found.fetchone()
        if named is None:
            raise NoSuchCalendar(f"there is no exclusion calendar named {calendar!r}")
        calendar_id = named["id"]
    if calendar_id == row["calendar_id"]:
        return False
    params = {"id": row["id"], "calendar_id": calendar_id, "now": now}
    conn.execute(query("calendars", "schedule_set_calendar"), params)
    return True


def _spec_of(row: Mapping[str, Any]) -> ScheduleSpec:
    """The timing and policies of a `schedules` row, as a spec."""
    return ScheduleSpec(
        name=row["name"],
        cron=row["cron"],
        every_seconds=row["interval_seconds"],
        timezone=row["timezone"],
        start_at=row["start_at"],
        end_at=row["end_at"],
        overlap=OverlapPolicy(row["overlap"]),
        catchup=row["catchup"],
        catchup_limit=row["catchup_limit"],
        catchup_window_seconds=row["catchup_window_seconds"],
        exact_minute=row["exact_minute"],
        spread_seconds=row["spread_seconds"],
        dst_skipped=DstSkipped(row["dst_skipped"]),
        dst_repeated=DstRepeated(row["dst_repeated"]),
        auto_pause_after=row["auto_pause_after"],
    )


def _validate_fields(spec: ScheduleSpec) -> list[str]:
    """Refuse, with one sentence, a spec outside the ranges of `app.core.limits`."""
    with limits.refused_as(ScheduleError):
        return _check_fields(spec)


def _check_fields(spec: ScheduleSpec) -> list[str]:
    limits.check_name("a schedule name", spec.name, MAX_NAME_LENGTH)
    name = spec.name.strip()
    if not name or name != spec.name:
        raise ScheduleError(
            f"a schedule name must be 1 to {MAX_NAME_LENGTH} characters without leading or "
            f"trailing spaces, got {spec.name!r}"
        )
    if (spec.cron is None) == (spec.every_seconds is None):
        raise ScheduleError(
            "give exactly one of a cron expression (--cron) or an interval (--every)"
        )
    if spec.every_seconds is not None:
        if isinstance(spec.every_seconds, int) and spec.every_seconds <= 0:
            raise ScheduleError(
                f"the interval must be a positive number of seconds, not {spec.every_seconds}"
            )
        limits.check_whole("the interval", spec.every_seconds, 1, limits.MAX_DURATION_SECONDS)
    limits.check_text("the time zone", spec.timezone, MAX_NAME_LENGTH)
    if spec.cron is not None:
        limits.check_text("the cron expression", spec.cron)
    try:
        zone_named(spec.timezone)
        cron = parse_cron(spec.cron) if spec.cron is not None else None
    except RecurrenceError as exc:
        raise ScheduleError(str(exc)) from None
    for label, moment in (("the start", spec.start_at), ("the end", spec.end_at)):
        if moment is not None:
            limits.check_instant(label, moment)
    if spec.start_at and spec.end_at and spec.end_at <= spec.start_at:
        raise ScheduleError("the end of a schedule must come after its start")
    for label, value, low, high in (
        ("the spread window", spec.spread_seconds, 0, limits.MAX_DURATION_SECONDS),
        ("the timeout", spec.timeout_seconds, 1, limits.MAX_DURATION_SECONDS),
        ("max retries", spec.max_retries, 0, limits.MAX_RETRIES),
    ):
        limits.check_whole(label, value, low, high)
    for label, optional, low, high in (
        ("the catch-up limit", spec.catchup_limit, 1, limits.MAX_COUNT),
        ("the catch-up window", spec.catchup_window_seconds, 1, limits.MAX_DURATION_SECONDS),
        ("auto-pause after", spec.auto_pause_after, 1, limits.MAX_COUNT),
    ):
        if optional is not None:  # None: off
            limits.check_whole(label, optional, low, high)
    for label, choice, kind in (
        ("the overlap policy", spec.overlap, OverlapPolicy),
        ("what a skipped hour does (dst_skipped)", spec.dst_skipped, DstSkipped),
        ("what a repeated hour does (dst_repeated)", spec.dst_repeated, DstRepeated),
    ):
        if not isinstance(choice, kind):
            choices = ", ".join(k.value for k in kind)
            raise ScheduleError(f"{label} must be one of {choices}, got {choice!r}")
    for label, flag in (("catch-up", spec.catchup), ("exact minute", spec.exact_minute)):
        if not isinstance(flag, bool):
            raise ScheduleError(f"{label} must be true or false, got {flag!r}")
    if spec.catchup_limit is not None and not spec.catchup:
        raise ScheduleError("a catch-up limit needs catch-up on (use --catchup N)")
    warnings = []
    dst_options_set = (spec.dst_skipped, spec.dst_repeated) != (DstSkipped.SHIFT, DstRepeated.FIRST)
    if dst_options_set and (cron is None or not cron.fixed_hour):
        warnings.append(
            "the DST options only apply to cron schedules at fixed hours; this schedule "
            "follows elapsed time"
        )
    return warnings


def _schedule_row(spec: ScheduleSpec, created_at: datetime) -> dict[str, Any]:
    return {
        "id": uuid.uuid4(),
        "name": spec.name,
        "cron": parse_cron(spec.cron).text if spec.cron is not None else None,
        "interval_seconds": spec.every_seconds,
        "timezone": spec.timezone,
        "start_at": spec.start_at,
        "end_at": spec.end_at,
        "overlap": spec.overlap.value,
        "catchup": spec.catchup,
        "catchup_limit": spec.catchup_limit,
        "catchup_window_seconds": spec.catchup_window_seconds,
        "dst_skipped": spec.dst_skipped.value,
        "dst_repeated": spec.dst_repeated.value,
        "exact_minute": spec.exact_minute,
        "spread_seconds": spec.spread_seconds,
        "auto_pause_after": spec.auto_pause_after,
        "created_at": created_at,
    }


def _never_fires(spec: ScheduleSpec, rule: Recurrence, now: datetime) -> str:
    """Why `rule` has no fire after `now`, in the words of what is true."""
    if spec.end_at is not None and spec.end_at <= now:
        return f"the schedule would never fire: its end {spec.end_at:%Y-%m-%d %H:%M} UTC has passed"
    unbounded = replace(rule, end=None)
    if spec.end_at is not None:
        if next_fire(unbounded, now) or fire_past_latest(unbounded, now):
            return "the schedule would never fire: its end comes before its first fire"
    beyond = fire_past_latest(rule, now)
    if beyond is not None:
        return (
            f"the schedule's next fire would be {beyond.local:%Y-%m-%d %H:%M} ({spec.timezone}), "
            f"past the latest date Sundial schedules: fires must come before "
            f"{limits.LATEST:%Y-%m-%d} (UTC)"
        )
    return f"cron expression {spec.cron!r} never fires: no date matches it within 9 years"


def _target_for(
    conn: Conn, spec: ScheduleSpec, now: datetime | None
) -> tuple[dict[str, Any], list[str]]:
    """What the schedule fires (job_id, workflow_id, owns_job), and warnings."""
    if sum(x is not None for x in (spec.handler, spec.job, spec.workflow)) != 1:
        raise ScheduleError(
            "give one of --handler (to create the job with the schedule), --job (an existing "
            "job definition) or --workflow"
        )
    target: dict[str, Any] = {"job_id": None, "workflow_id": None, "owns_job": False}
    for label, wanted in (("the workflow name", spec.workflow), ("the job name", spec.job)):
        if wanted is not None:
            with limits.refused_as(ScheduleError):
                limits.check_name(label, wanted)
    if spec.workflow is not None:
        found = conn.execute(query("workflows", "workflow_by_name"), {"name": spec.workflow})
        workflow = found.fetchone()
        if workflow is None:
            raise TargetMissing(f"there is no workflow named {spec.workflow!r}")
        return {**target, "workflow_id": workflow["id"]}, []
    if spec.job is not None:
        found = conn.execute(query("job_definitions", "job_definition_by_name"), {"name": spec.job})
        job = found.fetchone()
        if job is None:
            raise TargetMissing(f"there is no job definition named {spec.job!r}")
        return {**target, "job_id": job["id"]}, []
    assert spec.handler is not None
    new = _validated_job_settings(spec)
    warnings = check_handler(conn, spec.handler, now)
    try:
        handler_args.check_declared(conn, spec.handler, spec.args, now)
    except handler_args.ArgsError as exc:
        raise ScheduleError(f"args: {exc}") from None
    new.update(name=spec.name, handler=spec.handler, args=Jsonb(spec.args), id=uuid.uuid4())
    new.setdefault("max_crashes", limits.DEFAULT_MAX_CRASHES)
    if conn.execute(query("job_definitions", "job_definition_insert"), new).fetchone() is None:
        raise ScheduleError(
            f"a job definition named {spec.name!r} already exists; schedule it with "
            f"--job {spec.name!r} instead of --handler"
        )
    return {**target, "job_id": new["id"], "owns_job": True}, warnings


def _validated_job_settings(spec: ScheduleSpec) -> dict[str, Any]:
    """The settings of the job a schedule creates, checked like a run's."""
    assert spec.handler is not None
    try:
        run_inserts.NewRun(
            spec.handler,
            spec.args,
            priority=spec.priority,
            timeout_seconds=spec.timeout_seconds,
            max_retries=spec.max_retries,
            execution_model=spec.execution_model,
        ).validate()
    except UsageError as exc:
        raise ScheduleError(str(exc)) from None
    return {
        "execution_model": spec.execution_model,
        "priority": spec.priority,
        "timeout_seconds": spec.timeout_seconds,
        "max_retries": spec.max_retries,
    }


def check_handler(conn: Conn, handler: str, now: datetime | None = None) -> list[str]:
    """Refuse a handler no worker knows; warnings when that cannot be checked yet.

    Known: the built-ins plus what live workers registered (or, when none is live, what
    any worker registered). With no worker ever registered, only built-ins are certain:
    another name is accepted with a warning.
    """
    if handler in BUILTINS:
        return []
    rows = worker_registry.registrations(conn, now)
    if not rows:
        return [f"no worker has registered yet, so handler {handler!r} could not be checked"]
    registered = [r for r in rows if r["live"]] or rows
    known = set(BUILTINS).union(*(r["handlers"] for r in registered))
    if handler not in known:
        raise ScheduleError(f"unknown handler {handler!r}: workers know {', '.join(sorted(known))}")
    return []


# ---- pause, resume, run now, delete -------------------------------------------------------


def pause(
    conn: Conn,
    name: str,
    note: str | None = None,
    until: datetime | None = None,
    now: datetime | None = None,
    *,
    actor: str = SYSTEM_ACTOR,
) -> None:
    """Pause a schedule (its fires are recorded as `paused`), optionally until a time."""
    with limits.refused_as(ScheduleError):
        if note is not None:
            limits.check_text("the pause note", note)
        if until is not None:
            limits.check_instant("the end of the pause", until)
    with conn.transaction():
        row = _lock(conn, name)
        before = snapshot_of(conn, name)
        at = db_now(conn, now)
        if until is not None and until <= at:
            raise ScheduleError("the pause must end in the future")
        params = {"id": row["id"], "note": note, "until": until, "now": now}
        conn.execute(query("schedules", "schedule_pause"), params)
        _audit_change(conn, actor, "schedule.pause", row["id"], before)


def resume(
    conn: Conn, name: str, now: datetime | None = None, *, actor: str = SYSTEM_ACTOR
) -> bool:
    """Resume a paused schedule; False when it was not paused."""
    with conn.transaction():
        row = _lock(conn, name)
        before = snapshot_of(conn, name)
        cursor = conn.execute(query("schedules", "schedule_resume"), {"id": row["id"], "now": now})
        if cursor.rowcount != 1:
            return False
        _audit_change(conn, actor, "schedule.resume", row["id"], before)
        return True


def run_now(
    conn: Conn, name: str, now: datetime | None = None, *, actor: str = SYSTEM_ACTOR
) -> Started:
    """Start the schedule's job (or workflow) at once, recorded as a manual fire at now."""
    with conn.transaction():
        row = _lock(conn, name)
        refuse_disabled_handlers(conn, job_id=row["job_id"], workflow_id=row["workflow_id"])
        at = db_now(conn, now)
        shapes = workflow_shapes(conn, [row["workflow_id"]])
        if row["workflow_id"] is not None and row["workflow_id"] not in shapes:
            raise ScheduleError(f"the workflow of schedule {name!r} has no steps")
        [started] = start_fires(conn, [Start(row, at, at)], shapes)
        if started.run_id is None and started.dag_run_id is None:
            raise ScheduleError(f"schedule {name!r} already fired at this very instant; try again")
        local = at.astimezone(zone_named(row["timezone"])).replace(tzinfo=None)
        record = FireRecord(
            row["id"], at, local, FireOutcome.ENQUEUED, link=at, manual=True, detail="run now"
        )
        record_fires(conn, [record], now)
        run = {"run_id": started.run_id, "dag_run_id": started.dag_run_id, "fire_time": at}
        audit.record(conn, actor, "schedule.run_now", "schedule", name, after=run,
                     subject_id=row["id"])  # fmt: skip
        return started


def delete(conn: Conn, name: str, *, actor: str = SYSTEM_ACTOR) -> None:
    """Delete a schedule and its fire ledger (and the job definition it created, if no
    other schedule uses it). Its runs keep their history."""
    with conn.transaction():
        row = _lock(conn, name)
        before = snapshot_of(conn, name)
        conn.execute(query("schedules", "schedule_delete"), {"id": row["id"]})
        if row["owns_job"]:
            conn.execute(
                query("job_definitions", "job_definition_delete_unused"), {"id": row["job_id"]}
            )
        audit.record(conn, actor, "schedule.delete", "schedule", name, before=before,
                     subject_id=row["id"])  # fmt: skip


def _audit_change(
    conn: Conn, actor: str, action: str, schedule_id: uuid.UUID, before: Mapping[str, Any]
) -> None:
    """Audit a change of a schedule (`before`: its snapshot), read again for the after."""
    name = before["name"]
    after = snapshot_of(conn, name)
    audit.record(conn, actor, action, "schedule", name, before=dict(before), after=after,
                 subject_id=schedule_id)  # fmt: skip


# What a schedule's audit snapshot holds: its rule, policies, target and pause state (and
# its exclusion calendar, by name).
SNAPSHOT_COLUMNS = (
    "cron", "interval_seconds", "timezone", "start_at", "end_at", "overlap", "catchup",
    "catchup_limit", "catchup_window_seconds", "exact_minute", "spread_seconds",
    "dst_skipped", "dst_repeated", "auto_pause_after", "active", "paused_note", "paused_until",
)  # fmt: skip


def snapshot_of(conn: Conn, name: str) -> dict[str, Any]:
    """Schedule `name` as the audit log keeps it: rule, policies, target, pause state."""
    row = conn.execute(query("schedules", "schedule_by_name_full"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleError(f"there is no schedule named {name!r}")
    values = {column: row[column] for column in SNAPSHOT_COLUMNS}
    return {"name": name, **values, "job": row["job_name"], "workflow": row["workflow_name"],
            CALENDAR: row["calendar_name"]}  # fmt: skip


def _find(conn: Conn, name: str) -> dict[str, Any]:
    with limits.refused_as(ScheduleError):
        limits.check_text("a schedule name", name, MAX_NAME_LENGTH)
    row = conn.execute(query("schedules", "schedule_by_name"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleError(f"there is no schedule named {name!r}")
    return row


def _lock(conn: Conn, name: str) -> dict[str, Any]:
    with limits.refused_as(ScheduleError):
        limits.check_text("a schedule name", name, MAX_NAME_LENGTH)
    row = conn.execute(query("schedules", "schedule_lock_by_name"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleError(f"there is no schedule named {name!r}")
    return row


# ---- the ledger ---------------------------------------------------------------------------


def prune_fires(
    conn: Conn, before: datetime, after: uuid.UUID | None, limit: int = 500
) -> tuple[int, uuid.UUID | None]:
    """Delete the ledger rows of fires before `before` for the `limit` schedules after id
    `after`; returns how many went and the slice's last schedule id (None at the end)."""
    params = {"before": before, "after": after, "limit": limit}
    row = conn.execute(query("schedules", "fire_prune"), params).fetchone()
    assert row is not None
    return int(row["fires"]), row["last"]


def list_schedules(conn: Conn) -> list[dict[str, Any]]:
    return conn.execute(query("schedules", "schedule_list")).fetchall()


def zone_of(conn: Conn, name: str) -> str:
    """The time zone of schedule `name`."""
    return str(_find(conn, name)["timezone"])


def list_fires(conn: Conn, name: str, limit: int = DEFAULT_FIRES_SHOWN) -> list[dict[str, Any]]:
    with limits.refused_as(ScheduleError):
        limits.check_whole("the number of fires shown", limit, 1, limits.MAX_FIRES_SHOWN)
    row = _find(conn, name)
    return conn.execute(
        query("schedules", "fire_list"), {"id": row["id"], "limit": limit}
    ).fetchall()


# ---- the dashboard's reads and preview ------------------------------------------------------

PREVIEW_FIRES = 10
FIRE_PAGE_SIZE = 50


def preview(
    spec: ScheduleSpec, now: datetime, count: int = PREVIEW_FIRES, anchor: datetime | None = None
) -> tuple[list[Fire], list[str]]:
    """The next `count` fires of `spec`'s rule after `now`, validated as `create_schedule`
    would (its target aside), and its warnings; ScheduleError for a rule that never fires.
    An interval counts from `anchor` (the schedule's creation; `now` for a new one)."""
    warnings = _validate_fields(spec)
    rule = recurrence_of(_schedule_row(spec, anchor or now))
    fires = list(itertools.islice(fires_after(rule, now), count))
    if not fires:
        raise ScheduleError(_never_fires(spec, rule, now))
    return fires, warnings


MAX_FIRES_NEAR_A_CHANGE = 400  # an every-minute rule makes 360 in the six hours around one


def clock_change_ahead(
    spec: ScheduleSpec, now: datetime, anchor: datetime | None = None
) -> tuple[ClockChange, list[Fire]] | None:
    """The next clock change in `spec`'s zone (within about a year), with the rule's fires
    from three hours before it to three after (the only ones it can move); None where the
    zone has none."""
    change = next_clock_change(zone_named(spec.timezone), now)
    if change is None:
        return None
    rule = recurrence_of(_schedule_row(spec, anchor or now))
    near = fires_after(rule, max(now, change.at - timedelta(hours=3)))
    until = change.at + timedelta(hours=3)
    fires = itertools.takewhile(lambda f: f.at < until, near)
    return change, list(itertools.islice(fires, MAX_FIRES_NEAR_A_CHANGE))


def details(conn: Conn, name: str) -> dict[str, Any]:
    """Schedule `name` for its page: the row, what it runs, its last run and ledger size."""
    row = conn.execute(query("schedules", "schedule_by_name_full"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleError(f"there is no schedule named {name!r}")
    params = {"id": row["id"]}
    row["last_run"] = conn.execute(query("schedules", "schedule_last_run"), params).fetchone()
    fires = conn.execute(query("schedules", "fire_count"), params).fetchone()
    row["fire_count"] = fires["fires"] if fires else 0
    return row


def next_fires(row: Mapping[str, Any], count: int = PREVIEW_FIRES) -> list[Fire]:
    """A stored schedule's next `count` intended fires, from its next fire on."""
    if row["next_fire_time"] is None:
        return []
    rule = recurrence_of(row)
    return list(itertools.islice(fires_after(rule, row["next_fire_time"] - EPSILON), count))


LIST_PAGE = 100  # schedules listed on one page


def search(
    conn: Conn,
    name: str | None,
    target: str | None,
    paused: bool | None,
    after: str | None = None,
    limit: int | None = None,
) -> NamePage:
    """One page of the schedules whose name / job or workflow name contain the words given,
    paused or not, by name, after the name `after` (None: the first page)."""
    return page_by_name(
        conn,
        query("schedules", "schedule_search"),
        query("schedules", "schedule_search_count"),
        {"name": _like(name), "target": _like(target), "paused": paused},
        after,
        limit or LIST_PAGE,
    )


def _like(text: str | None) -> str | None:
    """`text` as a literal ILIKE fragment (its % and _ match themselves)."""
    return like_literal(text) if text else None


def fire_page(
    conn: Conn, schedule_id: uuid.UUID, before: datetime | None, limit: int = FIRE_PAGE_SIZE
) -> list[dict[str, Any]]:
    """Up to `limit` ledger rows of a schedule older than `before` (None: the newest)."""
    params = {"id": schedule_id, "before": before, "limit": limit}
    return conn.execute(query("schedules", "fire_page"), params).fetchall()


# ---- version history -------------------------------------------------------------------------

_RESTORED_TYPES: dict[str, Callable[[Any], Any]] = {
    "overlap": OverlapPolicy,
    "dst_skipped": DstSkipped,
    "dst_repeated": DstRepeated,
    "start_at": datetime.fromisoformat,
    "end_at": datetime.fromisoformat,
}


def apply_snapshot(
    conn: Conn, name: str, snapshot: Mapping[str, Any], *, actor: str, action: str
) -> None:
    """Make schedule `name` fire as `snapshot` (an audit after-snapshot) says: its rule,
    policies and exclusion calendar (when the snapshot recorded one: older ones did not);
    its name, target and pause state stay as they are."""
    changes: dict[str, Any] = {}
    for column in SNAPSHOT_COLUMNS:
        key = "every_seconds" if column == "interval_seconds" else column
        if key in EDITABLE and column in snapshot:
            value = snapshot[column]
            if value is not None and key in _RESTORED_TYPES:
                value = _RESTORED_TYPES[key](value)
            changes[key] = value
    if CALENDAR in snapshot:
        changes[CALENDAR] = snapshot[CALENDAR]
    try:
        update_schedule(conn, name, changes, actor=actor, action=action)
    except NoSuchCalendar:
        raise NoSuchCalendar(
            f"that version names the exclusion calendar {snapshot[CALENDAR]!r}, which "
            f"no longer exists: create it again, or edit the schedule instead"
        ) from None


versions.register(
    versions.Kind(
        "schedule",
        # A calendar chosen on the calendar's page is audited with the calendar alone.
        ("schedule.create", "schedule.update", "schedule.calendar"),
        apply_snapshot,
        ("schedules", "schedule_by_name"),
        ignored=frozenset({"active", "paused_note", "paused_until"}),
        partial=frozenset({"schedule.calendar"}),
        recorded_later={CALENDAR: "exclusion calendar"},
    )
)
