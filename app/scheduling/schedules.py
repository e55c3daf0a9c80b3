"""Schedule operations for people, the same for the CLI, the dashboard and the API.

Create, change, pause, resume, run now, delete and roll back; what a schedule is and how it is
checked is `app.scheduling.schedule_spec`, reading schedules `app.scheduling.schedule_reads`.
Each operation is one transaction that locks the schedule row, so it never interleaves with
a trigger firing the same schedule. Bad input raises `ScheduleError` with one sentence;
nothing is written then.

    with transaction(url) as conn:
        created = create_schedule(conn, ScheduleSpec(name="nightly", cron="30 2 * * *",
                                                     timezone="Europe/Berlin", handler="noop"))
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core import limits
from app.core.db import Conn
from app.core.errors import about
from app.core.sql import query
from app.handlers.gate import refuse_disabled_handlers
from app.people import audit, versions
from app.scheduling.cron import DstRepeated, DstSkipped, next_fire
from app.scheduling.fire_decisions import FireOutcome, OverlapPolicy
from app.scheduling.fire_ledger import FireRecord, record_fires
from app.scheduling.fire_starts import Start, Started, start_fires, workflow_shapes
from app.scheduling.schedule_rules import db_now, recurrence_of
from app.scheduling.schedule_spec import (
    CALENDAR,
    EDITABLE,
    MAX_NAME_LENGTH,
    RULE_COLUMNS,
    NoSuchCalendar,
    ScheduleConflict,
    ScheduleError,
    ScheduleSpec,
    never_fires,
    refuse_workflow_expiry,
    schedule_row,
    spec_of,
    target_for,
    validate_fields,
)
from app.scheduling.zones import zone_named

# Who a change is recorded as when the caller does not say (scripts, tests); the CLI passes
# `audit.cli_actor()` and the dashboard the signed-in person.
SYSTEM_ACTOR = "system"


@dataclass(frozen=True, slots=True)
class Created:
    id: uuid.UUID
    next_fire_time: datetime
    warnings: list[str]


# ---- create ------------------------------------------------------------------------------


def create_schedule(
    conn: Conn, spec: ScheduleSpec, now: datetime | None = None, *, actor: str = SYSTEM_ACTOR
) -> Created:
    """Validate `spec` and create the schedule (and its job definition, given a handler)."""
    with conn.transaction():
        created_at = db_now(conn, now)
        warnings = validate_fields(spec)
        row = schedule_row(spec, created_at)
        rule = recurrence_of(row)
        first = next_fire(rule, created_at)
        if first is None:
            raise never_fires(spec, rule, created_at)
        if conn.execute(query("schedules", "schedule_by_name"), {"name": spec.name}).fetchone():
            raise ScheduleConflict(f"a schedule named {spec.name!r} already exists", "name")
        target, job_warnings = target_for(conn, spec, now)
        refuse_workflow_expiry(spec, target["workflow_id"] is not None)
        refuse_disabled_handlers(conn, job_id=target["job_id"], workflow_id=target["workflow_id"])
        row.update(target, next_fire_time=first.at)
        if conn.execute(query("schedules", "schedule_insert"), row).fetchone() is None:
            raise ScheduleConflict(f"a schedule named {spec.name!r} already exists", "name")
        after = snapshot_of(conn, spec.name)
        audit.record(conn, actor, "schedule.create", "schedule", spec.name, after=after,
                     subject_id=row["id"])  # fmt: skip
    return Created(row["id"], first.at, warnings + job_warnings)


@dataclass(frozen=True, slots=True)
class Updated:
    next_fire_time: datetime | None
    changed: list[str]  # the columns whose value changed
    warnings: list[str]


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
        spec = spec_of(row).model_copy(update=timing)
        if changes.get("cron") is not None:
            spec = spec.model_copy(update={"every_seconds": None})
        if changes.get("every_seconds") is not None:
            spec = spec.model_copy(update={"cron": None})
        warnings = validate_fields(spec)
        refuse_workflow_expiry(spec, row["workflow_id"] is not None)
        new = schedule_row(spec, row["created_at"])
        del new["id"], new["created_at"]
        changed = [column for column, value in new.items() if value != row[column]]
        next_fire_time = row["next_fire_time"]
        if RULE_COLUMNS.intersection(changed):
            rule = recurrence_of({**row, **new})
            first = next_fire(rule, at)
            if first is None:
                raise never_fires(spec, rule, at)
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
            raise NoSuchCalendar(f"there is no exclusion calendar named {calendar!r}", "calendar")
        calendar_id = named["id"]
    if calendar_id == row["calendar_id"]:
        return False
    params = {"id": row["id"], "calendar_id": calendar_id, "now": now}
    conn.execute(query("calendars", "schedule_set_calendar"), params)
    return True


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
            with about("note"):
                limits.check_text("the pause note", note)
        if until is not None:
            with about("until"):
                limits.check_instant("the end of the pause", until)
    with conn.transaction():
        row = _lock(conn, name)
        before = snapshot_of(conn, name)
        at = db_now(conn, now)
        if until is not None and until <= at:
            raise ScheduleError("the pause must end in the future", "until")
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
    "dst_skipped", "dst_repeated", "auto_pause_after", "expire_after_seconds", "active",
    "paused_note", "paused_until",
)  # fmt: skip


def snapshot_of(conn: Conn, name: str) -> dict[str, Any]:
    """Schedule `name` as the audit log keeps it: rule, policies, target, pause state."""
    row = conn.execute(query("schedules", "schedule_by_name_full"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleError(f"there is no schedule named {name!r}")
    values = {column: row[column] for column in SNAPSHOT_COLUMNS}
    return {"name": name, **values, "job": row["job_name"], "workflow": row["workflow_name"],
            CALENDAR: row["calendar_name"]}  # fmt: skip


def _lock(conn: Conn, name: str) -> dict[str, Any]:
    with limits.refused_as(ScheduleError):
        limits.check_text("a schedule name", name, MAX_NAME_LENGTH)
    row = conn.execute(query("schedules", "schedule_lock_by_name"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleError(f"there is no schedule named {name!r}")
    return row


# ---- the ledger's retention -------------------------------------------------------------------


def prune_fires(
    conn: Conn, before: datetime, after: uuid.UUID | None, limit: int = 500
) -> tuple[int, uuid.UUID | None]:
    """Delete the ledger rows of fires before `before` for the `limit` schedules after id
    `after`; returns how many went and the slice's last schedule id (None at the end)."""
    params = {"before": before, "after": after, "limit": limit}
    row = conn.execute(query("schedules", "fire_prune"), params).fetchone()
    assert row is not None
    return int(row["fires"]), row["last"]


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
