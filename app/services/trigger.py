"""The trigger: the leader among trigger processes turns due schedules into runs.

Purpose: every intended fire of every schedule gets exactly one decision, written to the
fire ledger, and at most one run (`job_runs` UNIQUE(schedule_id, fire_time)).

Use: `sundial trigger` runs `Trigger.run_forever`; tests call `run_once(conn, now=...)`.
Each tick the process renews (or tries to take) the leader lease; only the leader acts:

1. releases queued fires whose blocking run has ended (overlap policy `queue`);
2. in batches, locks due schedules (`FOR UPDATE SKIP LOCKED`), plans their fires with the
   pure policies of `app.fires`, creates the runs through `app.runs.submit_fires`, writes
   the ledger and moves `next_fire_time` forward, all in ONE transaction per batch; when
   more than one batch is due, helper connections fire batches alongside (a `DueCursor`
   hands them out in order), so PostgreSQL writes one while Python plans the next;
3. pauses schedules whose last N runs (or DAG runs) failed (when they ask for it), and
   resumes pauses that expired.

Correctness never depends on there being one leader: a due schedule is planned under its
row lock, `next_fire_time` only moves forward (compare-and-set), and runs and ledger rows
are unique per (schedule, fire_time). Due decisions use the database clock; `now` injects
another one. A clock that jumps back finds nothing due.

Options (Settings): `trigger_interval_seconds`, `trigger_lease_seconds`,
`trigger_batch_size`, `trigger_catchup_max`, `trigger_connections`.

Telemetry: a log line per leadership change, per catch-up and per auto-pause.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

import psycopg

from app import runs
from app.config import Settings
from app.cron import RecurrenceError
from app.db import DatabaseUnavailable, connect
from app.fire_starts import Start, Started, start_fires, workflow_shapes
from app.fires import (
    DueSchedule,
    FireOutcome,
    OverlapPolicy,
    Plan,
    PlanLimits,
    plan_fires,
)
from app.json_rows import iso_text, json_rows
from app.lease import LeaderLease, new_holder_id
from app.schedules import (
    FireRecord,
    db_now,
    fire_rows,
    recurrence_of,
    write_fire_rows,
)
from app.services.periodic import run_periodic
from app.sql import query
from app.workflows import Shape

log = logging.getLogger(__name__)

Conn = psycopg.Connection[dict[str, Any]]

LEASE_NAME = "trigger"
RELEASE_BATCH_SIZE = 500  # queued fires released per tick
Planned = Sequence[tuple[Mapping[str, Any], Plan]]  # each locked schedule row with its plan
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


class DueCursor:
    """Where the next batch of due schedules starts, shared by the connections firing
    them. Batches are locked one at a time and each starts after the (next_fire_time, id)
    of the one before, so none rescans the index entries that earlier batches left behind.
    A batch smaller than the limit was the last."""

    def __init__(self, now: datetime | None, limit: int) -> None:
        self.now = now
        self.limit = limit
        self.exhausted = False
        self._after: tuple[datetime, uuid.UUID] | None = None
        self._mutex = threading.Lock()

    def lock_next(self, conn: Conn) -> list[dict[str, Any]]:
        """Lock the next batch in `conn`'s open transaction."""
        with self._mutex:
            if self.exhausted:
                return []
            after_time, after_id = self._after or (None, None)
            params = {
                "now": self.now,
                "limit": self.limit,
                "after_time": after_time,
                "after_id": after_id,
            }
            rows = conn.execute(query("schedules", "schedule_lock_due"), params).fetchall()
            self.exhausted = len(rows) < self.limit
            if rows:
                self._after = (rows[-1]["next_fire_time"], rows[-1]["id"])
            return rows

    def stop(self) -> None:
        with self._mutex:
            self.exhausted = True


@dataclass(slots=True)
class TickReport:
    """What one `run_once` did."""

    leader: bool = False
    schedules: int = 0  # due schedules planned
    fires: int = 0  # ledger rows written (all outcomes)
    runs: int = 0  # runs created
    released: int = 0  # queued fires enqueued
    auto_paused: int = 0
    resumed: int = 0


class Trigger:
    def __init__(
        self, settings: Settings, holder: str | None = None, url: str | None = None
    ) -> None:
        """`url`: the database, for the helper connections of big ticks (without it, one
        connection does all the work)."""
        self.settings = settings
        self.url = url
        self.lease = LeaderLease(
            LEASE_NAME, holder or new_holder_id(), settings.trigger_lease_seconds
        )
        self.limits = PlanLimits(catchup_max=settings.trigger_catchup_max)
        self.batch_size = settings.trigger_batch_size
        self.helpers = settings.trigger_connections - 1

    def run_once(self, conn: Conn, now: datetime | None = None) -> TickReport:
        """One tick on an autocommit connection; `now` replaces the database clock."""
        report = TickReport()
        if not self.lease.hold(conn, now):
            return report
        report.leader = True
        report.released = self.release_queued(conn, now)
        fired = self.fire_due(conn, now)
        report.schedules, report.fires, report.runs = fired.schedules, fired.fires, fired.runs
        if not self.lease.leading:
            return report
        report.auto_paused = self.auto_pause(conn, now)
        report.resumed = self.resume_expired(conn, now)
        return report

    def run_forever(self, url: str, stop: threading.Event) -> None:
        self.url = url
        run_periodic("trigger", url, self.settings.trigger_interval_seconds, self.run_once, stop)
        self._resign(url)

    # ---- due schedules ------------------------------------------------------------------

    def fire_due(self, conn: Conn, now: datetime | None = None) -> Batch:
        """Fire every due schedule, batch after batch, renewing the lease in between.

        When one batch is not enough and the trigger knows the database URL, helper
        connections fire batches alongside this one: PostgreSQL writes one batch while
        Python plans the next, which a single connection can only do in turn."""
        cursor = DueCursor(now, self.batch_size)
        fired = self.fire_batch(conn, cursor)
        if cursor.exhausted or not self.helpers or self.url is None:
            return fired + self._fire_batches(conn, cursor)
        with ThreadPoolExecutor(self.helpers, thread_name_prefix="trigger-helper") as pool:
            helpers = [pool.submit(self._help, self.url, cursor) for _ in range(self.helpers)]
            try:
                fired += self._fire_batches(conn, cursor)
            finally:
                cursor.stop()  # on an error here, the helpers finish their batch and stop
            for helper in helpers:
                fired += helper.result()  # a helper's error is raised here
        return fired

    def _fire_batches(self, conn: Conn, cursor: DueCursor) -> Batch:
        fired = Batch()
        while not cursor.exhausted:
            if not self.lease.hold(conn, cursor.now):
                cursor.stop()
                break
            fired += self.fire_batch(conn, cursor)
        return fired

    def _help(self, url: str, cursor: DueCursor) -> Batch:
        fired = Batch()
        with connect(url, autocommit=True) as conn:
            while not cursor.exhausted:
                fired += self.fire_batch(conn, cursor)
        return fired

    def fire_batch(self, conn: Conn, cursor: DueCursor) -> Batch:
        """Lock, plan and fire the cursor's next batch of due schedules, in one
        transaction."""
        now = cursor.now
        with conn.transaction():
            if not self.lease.still_held(conn, now):
                cursor.stop()
                return Batch()
            rows = cursor.lock_next(conn)
            if not rows:
                return Batch()
            shapes = workflow_shapes(conn, (r["workflow_id"] for r in rows))
            plans, broken = self._plan(rows, shapes)
            if broken:
                conn.execute(query("schedules", "schedule_stop_broken"), {"schedules": broken})
            for _, plan in plans:
                for run_id in plan.cancel_run_ids:
                    runs.cancel(conn, run_id)
            # Pipelined: the statements go out together and PostgreSQL runs them in turn;
            # the ledger finds the runs it links by their fire times, so nothing waits for
            # another statement's result. Errors still end the transaction (they are
            # raised when the pipeline syncs, before the commit).
            with conn.pipeline():
                self._advance(conn, plans)
                started = self._start(conn, plans, shapes)
                records = _ledger(plans)
                write_fire_rows(conn, fire_rows(records), now)
        _log_catchups(plans)
        created = sum(1 for s in started if s.run_id or s.dag_run_id)
        return Batch(len(rows), len(records), created)

    def _plan(
        self, rows: Sequence[Mapping[str, Any]], shapes: Mapping[uuid.UUID, Shape]
    ) -> tuple[Planned, str | None]:
        """Plans for the locked rows, and (as a JSON batch) the rows whose rule cannot be
        computed or whose workflow has no steps, which are stopped rather than failing
        every batch they land in."""
        plans = []
        broken = []
        for row in rows:
            try:
                due = _due(row)
                if row["workflow_id"] is not None and row["workflow_id"] not in shapes:
                    raise RecurrenceError("its workflow has no steps")
            except RecurrenceError as exc:
                note = f"stopped by the trigger: {exc}"
                log.error("schedule %s %s", row["name"], note, extra={"schedule_id": row["id"]})
                broken.append({"id": str(row["id"]), "note": note})
                continue
            plan = plan_fires(due, row["now"], row["active_run_ids"] or (), self.limits)
            plans.append((row, plan))
        return plans, json_rows(broken) if broken else None

    def _start(
        self, conn: Conn, plans: Planned, shapes: Mapping[uuid.UUID, Shape]
    ) -> list[Started]:
        """Create the runs (or DAG runs) of the fires the plans enqueue."""
        starts = [
            Start(row, entry.fire.at, entry.run_at or entry.fire.at)
            for row, plan in plans
            for entry in plan.runs_wanted
        ]
        return start_fires(conn, starts, shapes)

    def _advance(self, conn: Conn, plans: Planned) -> None:
        iso: dict[datetime, str] = {}
        moves = [
            {
                "id": str(row["id"]),
                "previous": iso_text(iso, row["next_fire_time"]),
                "next_fire_time": (
                    None if plan.next_fire_time is None else iso_text(iso, plan.next_fire_time)
                ),
                "resume": plan.resume,
            }
            for row, plan in plans
        ]
        conn.execute(query("schedules", "schedule_advance_many"), {"schedules": json_rows(moves)})

    # ---- queued fires, auto-pause, expired pauses ---------------------------------------

    def release_queued(self, conn: Conn, now: datetime | None = None) -> int:
        """Enqueue fires that waited behind a run that has now ended."""
        with conn.transaction():
            rows = conn.execute(
                query("schedules", "fire_lock_releasable"), {"limit": RELEASE_BATCH_SIZE}
            ).fetchall()
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
                query("schedules", "fire_release_many"), {"fires": json_rows(released), "now": now}
            )
        return sum(1 for s in started if s.run_id or s.dag_run_id)

    def auto_pause(self, conn: Conn, now: datetime | None = None) -> int:
        """Pause schedules whose last N finished runs all failed, saying why."""
        paused = 0
        streaks = conn.execute(query("schedules", "schedule_failing_streaks")).fetchall()
        for streak in streaks:
            note = (
                f"auto-paused after {streak['auto_pause_after']} consecutive failed runs "
                f"(last: run {streak['run_id']}: {streak['error'] or 'no error message'})"
            )
            params = {"id": streak["id"], "note": note, "now": now}
            if conn.execute(query("schedules", "schedule_auto_pause"), params).fetchone():
                paused += 1
                log.warning(
                    "schedule %s %s", streak["name"], note, extra={"schedule_id": streak["id"]}
                )
        return paused

    def resume_expired(self, conn: Conn, now: datetime | None = None) -> int:
        rows = conn.execute(query("schedules", "schedule_resume_expired"), {"now": now}).fetchall()
        for row in rows:
            log.info(
                "schedule %s resumed: its pause expired",
                row["name"],
                extra={"schedule_id": row["id"]},
            )
        return len(rows)

    def _resign(self, url: str) -> None:
        """Hand the lease over at once on a clean stop (best effort: it expires anyway)."""
        try:
            with connect(url, autocommit=True) as conn:
                self.lease.resign(conn)
        except (DatabaseUnavailable, psycopg.Error) as exc:
            log.warning("could not resign the trigger lease (%s); it will expire", exc)


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


def _ledger(plans: Planned) -> list[FireRecord]:
    """The ledger rows of the plans. An enqueued fire links its own run, a coalesced one
    the run of the fire that covered it."""
    records: list[FireRecord] = []
    for row, plan in plans:
        schedule_id = row["id"]
        for entry in plan.entries:
            fire = entry.fire
            link = fire.at if entry.outcome is FireOutcome.ENQUEUED else entry.covered_by
            records.append(
                FireRecord(
                    schedule_id,
                    fire.at,
                    fire.local,
                    entry.outcome,
                    link,
                    entry.coalesced_count,
                    detail=entry.detail,
                )
            )
    return records


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
