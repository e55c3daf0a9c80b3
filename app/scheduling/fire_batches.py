"""The trigger's batches: turning due schedules into runs and ledger rows, one transaction a batch.

Purpose: every intended fire of every schedule gets exactly one decision, written to the
fire ledger, and at most one run (`job_runs` UNIQUE(schedule_id, fire_time)).

Use: the trigger (`app.services.trigger`) holds the leader lease and calls, per tick,
`release_queued` and, batch after batch, `fire_batch`; "run now" (`app.scheduling.schedules`) calls
`start_fires` (`app.scheduling.fire_starts`) and `record_fires` (`app.scheduling.fire_ledger`). A
batch locks due schedules (`FOR UPDATE SKIP LOCKED`, `app.scheduling.due_cursor`), decides their
fires by the pure policies of `app.scheduling.fire_decisions` over the fire times of
`app.scheduling.cron`, and in ONE transaction moves `next_fire_time` forward (compare-and-set: it
only moves forward), creates the runs (through `app.runs.submission.submit_fire_rows` or
`submit_workflow_fires`: nothing here writes a run) and writes the ledger; the three writes read
one JSON document of the batch's fire rows (`fire_batch_rows`), and one of its shared fires
(`shared_fire_rows`).

Schedules come locked in groups that share everything their fires depend on (at the top
of the hour, thousands share `0 * * * *` in one zone): a group's fire is decided once, and
when every member simply gets a run, the group is sent as one row (`SharedFire`) with the
members' ids, jobs and spread offsets; any other group is planned schedule by schedule.

    cursor = DueCursor(now, limit=2000)
    while not cursor.exhausted:
        fired = fire_batch(conn, cursor, PlanLimits(), lease)

Due decisions use the database clock; `now` injects another one. SQL: `app/core/sql/firing.sql`.
Telemetry: a log line per catch-up and per schedule stopped for a broken rule.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from app.core.db import Conn
from app.core.json_rows import iso_text, json_rows
from app.core.sql import query
from app.dags.workflow_shapes import Shape
from app.runs import submission, transitions
from app.scheduling import calendars
from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.due_cursor import DueCursor, member_ids
from app.scheduling.exclusions import exclude
from app.scheduling.fire_decisions import (
    DueSchedule,
    FireOutcome,
    LedgerEntry,
    OverlapPolicy,
    Plan,
    PlanLimits,
    plan_fires,
    spread_offset_ms,
    spread_window,
    window_ms,
)
from app.scheduling.fire_starts import Start, start_fires, workflow_shapes
from app.scheduling.leader_lease import LeaderLease
from app.scheduling.schedule_rules import db_now, recurrence_of

log = logging.getLogger(__name__)

Planned = Sequence[tuple[Mapping[str, Any], Plan]]  # each locked schedule row with its plan

RELEASE_BATCH_SIZE = 500  # queued fires released per tick


_DOWNTIME_OUTCOMES = frozenset({FireOutcome.COALESCED, FireOutcome.MISSED})


@dataclass(frozen=True, slots=True)
class Batch:
    """What firing one or more batches of due schedules did."""

    schedules: int = 0  # due schedules locked and planned
    fires: int = 0  # ledger rows written
    runs: int = 0  # runs created

    def __add__(self, other: Batch) -> Batch:
        return Batch(
            self.schedules + other.schedules, self.fires + other.fires, self.runs + other.runs
        )


def fire_batch(conn: Conn, cursor: DueCursor, limits: PlanLimits, lease: LeaderLease) -> Batch:
    """Lock, plan and fire the cursor's next batch of due schedules, in one transaction,
    while `lease` is still held (else the cursor stops)."""
    now = cursor.now
    with conn.transaction():
        if not lease.still_held(conn, now):
            cursor.stop()
            return Batch()
        groups = cursor.lock_next(conn)
        if not groups:
            return Batch()
        groups = _split_active(groups, _active_runs(conn, _watched_ids(groups)))
        shapes = workflow_shapes(conn, (g["workflow_id"] for g in groups))
        plans, shared, broken = _plan(groups, shapes, limits)
        plans = _exclude(conn, plans)
        if broken:
            conn.execute(query("firing", "schedule_stop_broken"), {"schedules": broken, "now": now})
        for _, plan in plans:
            for run_id in plan.cancel_run_ids:
                transitions.cancel(conn, run_id)
        flows = _workflow_starts(plans)
        fires = json_rows(fire_batch_rows(plans))
        alike = json_rows(shared_fire_rows(shared)) if shared else None
        # Pipelined, the same documents for the three writes: the advance, the runs (DAG
        # runs first, when workflow schedules fired), then the ledger, which finds the runs
        # just made by fire time. Errors still end the transaction (they are raised when
        # the pipeline syncs, before the commit).
        with conn.pipeline():
            moves = {"schedules": fires, "shared": alike}
            conn.execute(query("firing", "schedule_advance_many"), moves)
            dag_runs = start_fires(conn, flows, shapes) if flows else []
            created = submission.submit_fire_rows(conn, fires, alike)
            records = {"fires": fires, "shared": alike, "now": now}
            conn.execute(query("firing", "fire_record_many"), records)
        made = created() + sum(1 for s in dag_runs if s.dag_run_id)
    _log_catchups(plans)
    fired = sum(len(plan.entries) for _, plan in plans) + sum(len(s.ids) for s in shared)
    return Batch(sum(len(member_ids(g)) for g in groups), fired, made)


@dataclass(frozen=True, slots=True)
class SharedFire:
    """A fire that every schedule of a group makes alike: one run each (an `enqueued`
    ledger row), at the fire's time plus the schedule's own spread offset in `spread`."""

    group: Mapping[str, Any]
    entry: LedgerEntry
    next_fire_time: datetime | None
    spread: timedelta

    @property
    def ids(self) -> list[uuid.UUID]:
        ids: list[uuid.UUID] = self.group["ids"]
        return ids


def _plan(
    groups: Sequence[Mapping[str, Any]], shapes: Mapping[uuid.UUID, Shape], limits: PlanLimits
) -> tuple[Planned, list[SharedFire], str | None]:
    """Plans for the locked schedules: a fire shared by a whole group, or each schedule's
    own plan; and (as a JSON batch) the schedules whose rule cannot be computed or whose
    workflow has no steps, which are stopped rather than failing every batch they land in."""
    plans: list[tuple[Mapping[str, Any], Plan]] = []
    shared = []
    broken = []
    for group in groups:
        first = group if group["ids"] is None else _member(group, 0)
        try:
            due = _due(first)
            if group["workflow_id"] is not None and group["workflow_id"] not in shapes:
                raise RecurrenceError("its workflow has no steps")
        except RecurrenceError as exc:
            note = f"stopped by the trigger: {exc}"
            for row in _members(group):
                log.error("schedule %s %s", row["name"], note, extra={"schedule_id": row["id"]})
                broken.append({"id": row["id_text"], "note": note})
            continue
        active_run_ids = group["active_run_ids"] or ()
        plan = plan_fires(due, group["now"], active_run_ids, limits)
        if group["ids"] is not None and _fires_alike(group, plan):
            entry = plan.entries[0]
            spread = spread_window(due.spread, entry.fire.at, plan.next_fire_time)
            shared.append(SharedFire(group, entry, plan.next_fire_time, spread))
            continue
        plans.append((first, plan))
        for i in range(1, len(member_ids(group))):  # the others alike, each with its own spread
            row = _member(group, i)
            plans.append((row, plan_fires(_due(row), group["now"], active_run_ids, limits)))
    return plans, shared, json_rows(broken) if broken else None


def _fires_alike(group: Mapping[str, Any], plan: Plan) -> bool:
    """Whether every member of `group` gets what `plan` (its first member's) says, but for
    the spread offset: one run and nothing else, made the same way for each. A workflow's
    DAG runs and a calendar's exclusions are decided schedule by schedule."""
    return (
        group["workflow_id"] is None
        and group["calendar_id"] is None
        and not plan.resume
        and not plan.cancel_run_ids
        and len(plan.entries) == 1
        and plan.entries[0].outcome is FireOutcome.ENQUEUED
    )


# A row of `schedule_lock_due` is one schedule (these columns set) or a group of several
# (the arrays set, the columns NULL): each column by the array that holds it in a group.
_MEMBER_COLUMNS = {
    "id": "ids",
    "id_text": "id_texts",
    "name": "names",
    "job_id_text": "job_id_texts",
}


_NO_ARRAYS = dict.fromkeys(_MEMBER_COLUMNS.values())


def _member(group: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Schedule `i` of a group, as a row of its own."""
    own = {column: group[array][i] for column, array in _MEMBER_COLUMNS.items()}
    return {**group, **_NO_ARRAYS, **own}


def _members(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The row's schedules, each as a row of its own."""
    return [row] if row["ids"] is None else [_member(row, i) for i in range(len(row["ids"]))]


def _watched_ids(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ids (as text) of the locked schedules whose overlap policy looks at their runs."""
    return [
        i for row in rows if row["overlap"] != OverlapPolicy.ALLOW
        for i in (row["id_texts"] or [row["id_text"]])
    ]  # fmt: skip


def _active_runs(conn: Conn, ids: list[str]) -> dict[uuid.UUID, list[int]]:
    """The pending, blocked or running runs of the schedules `ids` (as text), read once
    their locks are held."""
    if not ids:
        return {}
    # One array literal: a list would be written out element by element.
    params = {"ids": "{" + ",".join(ids) + "}"}
    found = conn.execute(query("firing", "schedule_active_runs"), params).fetchall()
    return {run["schedule_id"]: run["run_ids"] for run in found}


def _split_active(
    rows: Sequence[dict[str, Any]], active: Mapping[uuid.UUID, list[int]]
) -> list[dict[str, Any]]:
    """The rows with their `active_run_ids`: a schedule with active runs leaves its group
    for a row of its own."""
    split = []
    for row in rows:
        if row["ids"] is None or not active or not any(i in active for i in row["ids"]):
            row["active_run_ids"] = active.get(row["id"]) if row["ids"] is None else None
            split.append(row)
            continue
        idle = [i for i, schedule_id in enumerate(row["ids"]) if schedule_id not in active]
        for i, schedule_id in enumerate(row["ids"]):
            if schedule_id in active:
                split.append({**_member(row, i), "active_run_ids": active[schedule_id]})
        if len(idle) == 1:
            split.append({**_member(row, idle[0]), "active_run_ids": None})
        elif idle:
            arrays = {array: [row[array][i] for i in idle] for array in _MEMBER_COLUMNS.values()}
            split.append({**row, **arrays, "active_run_ids": None})
    return split


def _exclude(conn: Conn, plans: Planned) -> Planned:
    """The plans with fires on their calendar's holidays or blackout windows recorded as
    `excluded`: the batch's calendars are loaded in one statement, then checked in memory."""
    wanted = {row["calendar_id"] for row, _ in plans if row["calendar_id"] is not None}
    if not wanted:
        return plans
    found = calendars.load_many(conn, wanted)
    return [
        (row, exclude(plan, found[row["calendar_id"]], recurrence_of(row).zone))
        if row["calendar_id"] in found
        else (row, plan)
        for row, plan in plans
    ]


def _workflow_starts(plans: Planned) -> list[Start]:
    """The DAG runs that workflow schedules' fires ask for (a job schedule's runs go with
    the batch's fire rows)."""
    return [
        Start(row, entry.fire.at, entry.run_at or entry.fire.at)
        for row, plan in plans
        if row["workflow_id"] is not None
        for entry in plan.runs_wanted
    ]


def fire_batch_rows(plans: Planned) -> list[dict[str, Any]]:
    """The batch as JSON rows, one document for its three writes. Each row is a fire
    (ledger; with `run_at` when it asks for a run, and the schedule's `job_id` for a job
    schedule); the first row of each schedule also carries its move (`previous`,
    `next_fire_time`, `resume`), and a schedule without fires gets a row with its move
    only. Keys with nothing to say are left out (read as NULL)."""
    iso: dict[datetime, str] = {}
    rows: list[dict[str, Any]] = []
    for row, plan in plans:
        schedule_id = row["id_text"]
        job_id = row["job_id_text"]
        following = plan.next_fire_time
        moved: dict[str, Any] = {
            "schedule_id": schedule_id,
            "previous": iso_text(iso, row["next_fire_time"]),
            "next_fire_time": None if following is None else iso_text(iso, following),
        }
        if plan.resume:
            moved["resume"] = True
        move: dict[str, Any] | None = moved
        for entry in plan.entries:
            fire = entry.fire
            out = move if move is not None else {"schedule_id": schedule_id}
            move = None
            out["fire_time"] = fire_time = iso_text(iso, fire.at)
            out["local_time"] = iso_text(iso, fire.local)
            out["outcome"] = entry.outcome.value
            if job_id is not None:
                out["job_id"] = job_id
            if entry.outcome is FireOutcome.ENQUEUED:
                out["link"] = fire_time
                out["run_at"] = iso_text(iso, entry.run_at or fire.at)
            elif entry.covered_by is not None:
                out["link"] = iso_text(iso, entry.covered_by)
            if entry.coalesced_count:
                out["coalesced_count"] = entry.coalesced_count
            if entry.detail is not None:
                out["detail"] = entry.detail
            rows.append(out)
        if move is not None:
            rows.append(move)
    return rows


def shared_fire_rows(shared: Sequence[SharedFire]) -> list[dict[str, Any]]:
    """Shared fires as JSON rows: one per group, its members' ids, jobs and spread offsets
    (in milliseconds) as arrays in one order."""
    iso: dict[datetime, str] = {}
    rows = []
    for fire in shared:
        group, at = fire.group, fire.entry.fire.at
        window = window_ms(fire.spread)
        following = fire.next_fire_time
        row = {
            "schedule_ids": group["id_texts"],
            "job_ids": group["job_id_texts"],
            "offsets_ms": [spread_offset_ms(i, window) for i in group["ids"]],
            "previous": iso_text(iso, group["next_fire_time"]),
            "next_fire_time": None if following is None else iso_text(iso, following),
            "fire_time": iso_text(iso, at),
            "local_time": iso_text(iso, fire.entry.fire.local),
            "outcome": FireOutcome.ENQUEUED.value,
            "run_at": iso_text(iso, at),
        }
        if fire.entry.detail is not None:
            row["detail"] = fire.entry.detail
        rows.append(row)
    return rows


def _due(row: Mapping[str, Any]) -> DueSchedule:
    window = row["catchup_window_seconds"]
    return DueSchedule(
        id=row["id"],
        rule=recurrence_of(row),
        next_fire_time=row["next_fire_time"],
        active=row["active"],
        paused_until=row["paused_until"],
        paused_note=row["paused_note"],
        catchup=row["catchup"],
        catchup_limit=row["catchup_limit"],
        catchup_window=_seconds(window) if window else None,
        overlap=_OVERLAP_POLICIES[row["overlap"]],
        spread=_seconds(0 if row["exact_minute"] else row["spread_seconds"]),
        has_queued_fire=row["has_queued_fire"],
    )


_OVERLAP_POLICIES = {policy.value: policy for policy in OverlapPolicy}


@lru_cache(maxsize=256)
def _seconds(seconds: int) -> timedelta:
    return timedelta(seconds=seconds)


def _log_catchups(plans: Planned) -> None:
    for row, plan in plans:
        if any(e.outcome in _DOWNTIME_OUTCOMES for e in plan.entries):
            counts: dict[str, int] = defaultdict(int)
            for entry in plan.entries:
                counts[entry.outcome.value] += 1
            summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
            log.info(
                "schedule %s caught up: %s", row["name"], summary, extra={"schedule_id": row["id"]}
            )


def release_queued(conn: Conn, now: datetime | None = None) -> int:
    """Enqueue fires that waited behind a run that has now ended (overlap policy `queue`)."""
    with conn.transaction():
        rows = conn.execute(
            query("firing", "fire_lock_releasable"), {"limit": RELEASE_BATCH_SIZE}
        ).fetchall()
        active = _active_runs(conn, [r["id_text"] for r in rows])
        rows = [r for r in rows if r["id"] not in active]
        if not rows:
            return 0
        at = db_now(conn, now)
        shapes = workflow_shapes(conn, (r["workflow_id"] for r in rows))
        rows = [r for r in rows if r["workflow_id"] is None or r["workflow_id"] in shapes]
        started = start_fires(conn, [Start(r, r["fire_time"], at) for r in rows], shapes)
        released = [
            {"schedule_id": str(row["id"]), "fire_time": row["fire_time"].isoformat()}
            for row in rows
        ]
        conn.execute(
            query("firing", "fire_release_many"), {"fires": json_rows(released), "now": now}
        )
    return sum(1 for s in started if s.run_id or s.dag_run_id)
