"""The trigger: the leader among trigger processes turns due schedules into runs.

Purpose: every intended fire of every schedule gets exactly one decision, written to the
fire ledger, and at most one run (`job_runs` UNIQUE(schedule_id, fire_time)).

Use: `sundial trigger` runs `Trigger.run_forever`; tests call `run_once(conn, now=...)`.
Each tick the process renews (or tries to take) the leader lease; only the leader acts:

1. releases queued fires whose blocking run has ended (overlap policy `queue`);
2. fires due schedules batch after batch, each batch ONE transaction of
   `app.scheduling.fire_batches` (lock due schedules, decide their fires, create the runs, write
   the ledger, move `next_fire_time` forward); when more than one batch is due, helper connections
   fire batches alongside (a `DueCursor` hands them out in order), so PostgreSQL writes one
   while Python plans the next;
3. feeds running backfills (`app.scheduling.backfills`): submits their next past fires
   while fewer than their cap of their runs are pending or running;
4. pauses schedules whose last N runs (or DAG runs) failed (when they ask for it), and
   resumes pauses that expired.

What a fire does lives in `app.scheduling.fire_batches`; this module decides when and on which
connections to fire, and only while it holds the leader lease. Correctness never depends on there
being one leader: a due schedule is planned under its row lock, `next_fire_time` only
moves forward (compare-and-set), and runs and ledger rows are unique per (schedule,
fire_time). Due decisions use the database clock; `now` injects another one. A clock that
jumps back finds nothing due.

Options (Settings): `trigger_interval_seconds`, `trigger_lease_seconds`,
`trigger_batch_size`, `trigger_catchup_max`, `trigger_connections`.

Telemetry: a log line per leadership change, per catch-up and per auto-pause.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

import psycopg

from app.core.config import Settings
from app.core.db import Conn, DatabaseUnavailable, connect
from app.core.sql import query
from app.scheduling import backfills, fire_batches
from app.scheduling.due_cursor import DueCursor
from app.scheduling.fire_batches import Batch
from app.scheduling.fire_decisions import PlanLimits
from app.scheduling.leader_lease import LeaderLease, new_holder_id
from app.services.periodic import run_periodic

log = logging.getLogger(__name__)


LEASE_NAME = "trigger"


@dataclass(slots=True)
class TickReport:
    """What one `run_once` did."""

    leader: bool = False
    schedules: int = 0  # due schedules planned
    fires: int = 0  # ledger rows written (all outcomes)
    runs: int = 0  # runs created
    released: int = 0  # queued fires enqueued
    backfilled: int = 0  # runs submitted for backfills
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
        report.backfilled = backfills.feed_all(conn, now)
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
        """The cursor's next batch, fired while this trigger still holds the lease."""
        return fire_batches.fire_batch(conn, cursor, self.limits, self.lease)

    # ---- queued fires, auto-pause, expired pauses ---------------------------------------

    def release_queued(self, conn: Conn, now: datetime | None = None) -> int:
        """Enqueue fires that waited behind a run that has now ended."""
        return fire_batches.release_queued(conn, now)

    def auto_pause(self, conn: Conn, now: datetime | None = None) -> int:
        """Pause schedules whose last N finished runs all failed, saying why."""
        paused = 0
        streaks = conn.execute(query("schedules", "schedule_failing_streaks")).fetchall()
        for streak in streaks:
            note = (
                f"auto-paused after {streak['auto_pause_after']} consecutive failed runs "
                f"(last: run {streak['run_id']}: {streak['error'] or 'no error message'})"
            )
            params = {
                "id": streak["id"],
                "note": note,
                "resumed_at": streak["resumed_at"],
                "now": now,
            }
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
