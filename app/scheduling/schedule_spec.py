"""What a schedule is and how it is checked: its fields (`ScheduleSpec`), the errors a person
can fix, the parsing of durations and times people type, and the checks a create or an
edit passes before anything is written (the rule fires, the target exists, the handler is
live, the settings are in range).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from app.core import fields, limits
from app.core.db import Conn
from app.core.errors import Conflict, Missing, UsageError, about
from app.core.fields import Count, Duration, Retries, WholeSeconds
from app.core.sql import query
from app.handlers import handler_args, worker_registry
from app.handlers.builtin import BUILTINS
from app.runs import run_inserts
from app.runs.run_fields import RunSettingsFields
from app.scheduling.cron import DstRepeated, DstSkipped, Recurrence, fire_past_latest, next_fire
from app.scheduling.cron_expressions import RecurrenceError, parse_cron
from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_fields import ScheduleRuleFields
from app.scheduling.zones import zone_named

MAX_NAME_LENGTH = limits.MAX_NAME_LENGTH


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


class ScheduleSpec(ScheduleRuleFields, RunSettingsFields):
    """What a person asks for: when it fires, its policies (a schedule's own fields), and what
    it runs — a new job definition made from `handler` and its settings, an existing one
    (`job`), or a workflow (`workflow`: each fire is one DAG run).

    The pages, the CLI and the API build it without validation
    (`ScheduleSpec.model_construct`): `validate_fields` checks it, refusing in a person's
    words and naming the field."""

    name: str
    job: str | None = None
    workflow: str | None = None
    handler: str | None = None


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
    raise ScheduleError(
        f"catch-up must be latest, all or a positive number of fires, not {text!r}", "catchup"
    )


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
        "expire_after_seconds",
    }
)


# `update_schedule` also changes the exclusion calendar a schedule names (by its name).
CALENDAR = "calendar"


# Columns of the rule itself: changing one recomputes the next fire.
RULE_COLUMNS = frozenset(
    {"cron", "interval_seconds", "timezone", "start_at", "end_at", "dst_skipped", "dst_repeated"}
)


def spec_of(row: Mapping[str, Any]) -> ScheduleSpec:
    """The timing and policies of a `schedules` row, as a spec."""
    return ScheduleSpec.model_construct(
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
        expire_after_seconds=row["expire_after_seconds"],
    )


def validate_fields(spec: ScheduleSpec) -> list[str]:
    """Refuse, with one sentence, a spec outside the ranges of `app.core.limits`."""
    with limits.refused_as(ScheduleError):
        return _check_fields(spec)


def _check_fields(spec: ScheduleSpec) -> list[str]:
    with about("name"):
        limits.check_name("a schedule name", spec.name, MAX_NAME_LENGTH)
        name = spec.name.strip()
        if not name or name != spec.name:
            raise ScheduleError(
                f"a schedule name must be 1 to {MAX_NAME_LENGTH} characters without leading or "
                f"trailing spaces, got {spec.name!r}"
            )
    if (spec.cron is None) == (spec.every_seconds is None):
        raise ScheduleError(
            "give exactly one of a cron expression (--cron) or an interval (--every)", "cron"
        )
    if spec.every_seconds is not None:
        with about("every_seconds"):
            if isinstance(spec.every_seconds, int) and spec.every_seconds <= 0:
                raise ScheduleError(
                    f"the interval must be a positive number of seconds, not {spec.every_seconds}"
                )
            fields.check_whole(Duration, "the interval", spec.every_seconds)
    with about("timezone"):
        limits.check_text("the time zone", spec.timezone, MAX_NAME_LENGTH)
        try:
            zone_named(spec.timezone)
        except RecurrenceError as exc:
            raise ScheduleError(str(exc)) from None
    cron = None
    if spec.cron is not None:
        with about("cron"):
            limits.check_text("the cron expression", spec.cron)
            try:
                cron = parse_cron(spec.cron)
            except RecurrenceError as exc:
                raise ScheduleError(str(exc)) from None
    for input_name, label, moment in (("start_at", "the start", spec.start_at),
                                 ("end_at", "the end", spec.end_at)):  # fmt: skip
        if moment is not None:
            with about(input_name):
                limits.check_instant(label, moment)
    if spec.start_at and spec.end_at and spec.end_at <= spec.start_at:
        raise ScheduleError("the end of a schedule must come after its start", "end_at")
    # The ranges are the fields' (app.scheduling.schedule_fields, app.runs.run_fields).
    for input_name, label, value, range_of in (
        ("spread_seconds", "the spread window", spec.spread_seconds, WholeSeconds),
        ("timeout_seconds", "the timeout", spec.timeout_seconds, Duration),
        ("max_retries", "max retries", spec.max_retries, Retries),
    ):  # fmt: skip
        with about(input_name):
            fields.check_whole(range_of, label, value)
    for input_name, label, optional, range_of in (
        ("catchup_limit", "the catch-up limit", spec.catchup_limit, Count),
        ("catchup_window_seconds", "the catch-up window", spec.catchup_window_seconds, Duration),
        ("auto_pause_after", "auto-pause after", spec.auto_pause_after, Count),
        ("expire_after_seconds", "the time a fire may wait to start", spec.expire_after_seconds,
         Duration),
    ):  # fmt: skip
        if optional is not None:  # None: off
            with about(input_name):
                fields.check_whole(range_of, label, optional)
    for input_name, label, choice, kind in (
        ("overlap", "the overlap policy", spec.overlap, OverlapPolicy),
        ("dst_skipped", "what a skipped hour does (dst_skipped)", spec.dst_skipped, DstSkipped),
        ("dst_repeated", "what a repeated hour does (dst_repeated)", spec.dst_repeated,
         DstRepeated),
    ):  # fmt: skip
        if not isinstance(choice, kind):
            choices = ", ".join(k.value for k in kind)
            raise ScheduleError(f"{label} must be one of {choices}, got {choice!r}", input_name)
    for input_name, label, flag in (("catchup", "catch-up", spec.catchup),
                               ("exact_minute", "exact minute", spec.exact_minute)):  # fmt: skip
        if not isinstance(flag, bool):
            raise ScheduleError(f"{label} must be true or false, got {flag!r}", input_name)
    if spec.catchup_limit is not None and not spec.catchup:
        raise ScheduleError("a catch-up limit needs catch-up on (use --catchup N)", "catchup_limit")
    warnings = []
    dst_options_set = (spec.dst_skipped, spec.dst_repeated) != (DstSkipped.SHIFT, DstRepeated.FIRST)
    if dst_options_set and (cron is None or not cron.fixed_hour):
        warnings.append(
            "the DST options only apply to cron schedules at fixed hours; this schedule "
            "follows elapsed time"
        )
    return warnings


def schedule_row(spec: ScheduleSpec, created_at: datetime) -> dict[str, Any]:
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
        "expire_after_seconds": spec.expire_after_seconds,
        "created_at": created_at,
    }


def never_fires(spec: ScheduleSpec, rule: Recurrence, now: datetime) -> ScheduleError:
    """Why `rule` has no fire after `now`, in the words of what is true, as the error to raise."""
    if spec.end_at is not None and spec.end_at <= now:
        return ScheduleError(
            f"the schedule would never fire: its end {spec.end_at:%Y-%m-%d %H:%M} UTC has passed",
            "end_at",
        )
    unbounded = replace(rule, end=None)
    if spec.end_at is not None:
        if next_fire(unbounded, now) or fire_past_latest(unbounded, now):
            return ScheduleError(
                "the schedule would never fire: its end comes before its first fire", "end_at"
            )
    beyond = fire_past_latest(rule, now)
    if beyond is not None:
        return ScheduleError(
            f"the schedule's next fire would be {beyond.local:%Y-%m-%d %H:%M} ({spec.timezone}), "
            f"past the latest date Sundial schedules: fires must come before "
            f"{limits.LATEST:%Y-%m-%d} (UTC)",
            "cron",
        )
    return ScheduleError(
        f"cron expression {spec.cron!r} never fires: no date matches it within 9 years", "cron"
    )


def refuse_workflow_expiry(spec: ScheduleSpec, fires_workflow: bool) -> None:
    """A deadline applies to a job's runs: a workflow's fires cannot expire (yet)."""
    if fires_workflow and spec.expire_after_seconds is not None:
        raise ScheduleError(
            "a schedule of a workflow cannot give its fires a time to start by: deadlines "
            "apply to the runs of a job",
            "expire_after_seconds",
        )


def target_for(
    conn: Conn, spec: ScheduleSpec, now: datetime | None
) -> tuple[dict[str, Any], list[str]]:
    """What the schedule fires (job_id, workflow_id, owns_job), and warnings."""
    if sum(x is not None for x in (spec.handler, spec.job, spec.workflow)) != 1:
        raise ScheduleError(
            "give one of --handler (to create the job with the schedule), --job (an existing "
            "job definition) or --workflow",
            "job",
        )
    target: dict[str, Any] = {"job_id": None, "workflow_id": None, "owns_job": False}
    for input_name, label, wanted in (("workflow", "the workflow name", spec.workflow),
                                 ("job", "the job name", spec.job)):  # fmt: skip
        if wanted is not None:
            with about(input_name), limits.refused_as(ScheduleError):
                limits.check_name(label, wanted)
    if spec.workflow is not None:
        found = conn.execute(query("workflows", "workflow_by_name"), {"name": spec.workflow})
        workflow = found.fetchone()
        if workflow is None:
            raise TargetMissing(f"there is no workflow named {spec.workflow!r}", "workflow")
        return {**target, "workflow_id": workflow["id"]}, []
    if spec.job is not None:
        found = conn.execute(query("job_definitions", "job_definition_by_name"), {"name": spec.job})
        job = found.fetchone()
        if job is None:
            raise TargetMissing(f"there is no job definition named {spec.job!r}", "job")
        return {**target, "job_id": job["id"]}, []
    assert spec.handler is not None
    new = _validated_job_settings(spec)
    with about("handler"):
        warnings = check_handler(conn, spec.handler, now)
    try:
        handler_args.check_declared(conn, spec.handler, spec.args, now)
    except handler_args.ArgsError as exc:
        raise ScheduleError(f"args: {exc}", "args") from None
    new.update(name=spec.name, handler=spec.handler, args=Jsonb(spec.args), id=uuid.uuid4())
    new.setdefault("max_crashes", limits.DEFAULT_MAX_CRASHES)
    new.setdefault("dependencies", [])
    if conn.execute(query("job_definitions", "job_definition_insert"), new).fetchone() is None:
        raise ScheduleError(
            f"a job definition named {spec.name!r} already exists; schedule it with "
            f"--job {spec.name!r} instead of --handler",
            "name",
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
            queue=spec.queue,
        ).validate()
    except UsageError as exc:
        raise ScheduleError(str(exc), exc.field) from None
    return {
        "execution_model": spec.execution_model,
        "priority": spec.priority,
        "timeout_seconds": spec.timeout_seconds,
        "max_retries": spec.max_retries,
        "queue": spec.queue,
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
