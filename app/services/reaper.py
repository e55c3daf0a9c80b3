"""The reaper: returns runs whose lease expired to pending (or failed), ages priorities,
prunes history, fills the job statistics roll-up, moves the dependencies' circuit breakers,
queues and delivers notifications (`app.notify.outbox`).

Purpose: a worker that dies, stalls or loses its network stops heartbeating; once its
lease expires the reaper hands the run to another worker (or ends it when its attempts
are exhausted, or when it was cancelled). It also raises the effective priority of runs
that have waited too long, so low-priority work cannot starve. Every pass it moves the runs
that ended long enough ago out of the hot tables into the day partitions of their history
(`app.runs.history`: SUNDIAL_HOT_MINUTES, SUNDIAL_DEAD_LETTER_DAYS); every few minutes it makes
the coming days' partitions, drops the days past SUNDIAL_RETENTION_DAYS whole (exported to
SUNDIAL_ARCHIVE_DIR first when set), and deletes the fire ledger past SUNDIAL_KEEP_FIRES_DAYS,
sent notification messages past the retention, and the web sessions and sign-in links that
expired, a bounded amount per pass so reaping leases is never held up.
Each pass adds the run endings of the minutes closed since to the per-job statistics
roll-up (`app.observability.job_stats.fill`: a no-op read when no minute closed).

Use: `sundial reaper`; any number may run: each step is a conditional UPDATE over rows
locked with SKIP LOCKED, so two reapers never handle the same run.

Options: SUNDIAL_REAPER_INTERVAL_SECONDS, SUNDIAL_PRIORITY_AGING_SECONDS,
SUNDIAL_PRIORITY_AGING_MAX_BOOST.

Telemetry: `sundial_lease_expiries_total{outcome}`, a log line per reaped run.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from app.core.config import Settings
from app.core.db import Conn
from app.notify import outbox
from app.notify.outbox import DeliveryReport, Notifier
from app.observability import job_stats
from app.runs import breakers, history, queues, retention, transitions
from app.runs.counters import LEASE_EXPIRIES
from app.scheduling import schedule_rules, schedules
from app.services.periodic import run_periodic
from app.services.reconnecting import DB_ERRORS

log = logging.getLogger(__name__)

REAP_BATCH = 1000
PRUNE_INTERVAL_SECONDS = 300.0
PRUNE_BATCH = 1000  # rows per statement
PRUNE_BATCHES = 20  # statements per pass, at most
MOVE_BATCH = 1000  # runs (and DAG runs) moved to history per transaction
MOVE_BATCHES = 20  # transactions per pass, at most: 20,000 runs a pass keeps up with the
# design's 580 ended runs a second at a pass every few seconds
DROP_DAYS = 3  # history days dropped per prune pass, at most
SETTLE_PARTITIONS = 1  # finished days' partitions vacuumed per prune pass (seconds each)
SETTLE_MARGIN = timedelta(minutes=5)  # past the hot window: the mover's last batches
FIRE_PRUNE_SLICE = 500  # schedules whose ledger one statement prunes
FIRE_PRUNE_SLICES = 20  # statements per pass, at most


@dataclass(frozen=True)
class PrunedHistory:
    days: int = 0  # days of history dropped whole
    settled: int = 0  # finished days' partitions vacuumed
    fires: int = 0
    sessions: int = 0  # expired web sessions
    sign_in_links: int = 0  # expired sign-in links
    notifications: int = 0  # sent or failed messages of the notification outbox


@dataclass(frozen=True)
class ReaperReport:
    reaped: list[transitions.Reaped]
    aged: int
    pruned: PrunedHistory | None  # None: no prune pass this tick
    expired: int = 0  # runs not started by their deadline, skipped
    notified: DeliveryReport | None = None  # None: the notification step failed
    # Runs that left the hot tables for history this pass.
    moved: history.Moved = field(default_factory=history.Moved)


class Reaper:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._last_prune: datetime | None = None  # when the last prune pass ran
        self._fires_after: uuid.UUID | None = None  # where the ledger walk goes on
        self.notifier = Notifier(settings.secret_key)

    def run_once(self, conn: Conn, now: datetime | None = None) -> ReaperReport:
        reaped: list[transitions.Reaped] = []
        while True:
            batch = transitions.reap(conn, limit=REAP_BATCH, now=now)
            reaped += batch
            if len(batch) < REAP_BATCH:
                break
        for r in reaped:
            LEASE_EXPIRIES.labels(r.status).inc()
        expired = 0
        while True:
            ended = transitions.expire(conn, limit=REAP_BATCH, now=now)
            expired += len(ended)
            if len(ended) < REAP_BATCH:
                break
        if expired:
            log.info("%d runs not started by their deadline: skipped", expired,
                     extra={"count": expired})  # fmt: skip
        queues.prune_key_rates(conn, now=now)
        for dependency, change in breakers.evaluate(conn, now=now):
            log.warning("the circuit breaker of %s is %s: %s", dependency,
                        change.to.value.replace("_", "-"), change.reason,
                        extra={"dependency": dependency, "state": change.to.value})  # fmt: skip
        aged = transitions.age_priorities(
            conn,
            age_seconds=self.settings.priority_aging_seconds,
            max_boost=self.settings.priority_aging_max_boost,
            now=now,
        )
        if aged:
            log.info("raised the priority of %d long-waiting runs", aged, extra={"count": aged})
        job_stats.fill(conn, now=now)
        # After the roll-up: the minutes it reads are far younger than what moves.
        moved = self.move_to_history(conn, now)
        pruned = None
        at = schedule_rules.db_now(conn, now)  # the clock the tick is given, like its statements
        if self._prune_due(at):
            self._last_prune = at
            pruned = self.prune(conn, at)
        return ReaperReport(reaped, aged, pruned, expired, self._notify(conn, now), moved)

    def move_to_history(self, conn: Conn, now: datetime | None = None) -> history.Moved:
        """Move the runs due to leave the hot tables, batch after batch up to MOVE_BATCHES."""
        at = schedule_rules.db_now(conn, now)
        hot_before = at - timedelta(minutes=self.settings.hot_minutes)
        # Never ahead of the statistics roll-up, which reads endings from the hot tables.
        if (rolled_up := job_stats.filled_through(conn)) is not None:
            hot_before = min(hot_before, rolled_up)
        cutoffs = history.Cutoffs(
            hot_before=hot_before,
            dead_before=_before(at, self.settings.dead_letter_days),
            key_before=at - timedelta(hours=self.settings.idempotency_hours),
        )
        lone = dags = steps = 0
        for _ in range(MOVE_BATCHES):
            batch = history.move(conn, cutoffs, limit=MOVE_BATCH)
            lone += batch.lone_runs
            dags += batch.dag_runs
            steps += batch.dag_steps
            if batch.lone_runs < MOVE_BATCH and batch.dag_runs < MOVE_BATCH:
                break
        moved = history.Moved(lone, dags, steps)
        if moved.runs:
            log.info("moved %d ended runs (%d DAG runs) to history", moved.runs, dags,
                     extra={"count": moved.runs})  # fmt: skip
        return moved

    def _notify(self, conn: Conn, now: datetime | None) -> DeliveryReport | None:
        """Queue the messages the notification rules ask for, and deliver the due ones; a
        fault here is logged and never holds up the reaping."""
        try:
            return self.notifier.run_once(conn, now)
        except DB_ERRORS:
            raise
        except Exception:
            log.exception("the notification step failed; the next pass tries again")
            return None

    def _prune_due(self, at: datetime) -> bool:
        """A pass every PRUNE_INTERVAL_SECONDS; also when the clock went back (a test moved
        time, the database's clock was set back), so history is never kept forever."""
        if self._last_prune is None:
            return True
        since = (at - self._last_prune).total_seconds()
        return since >= PRUNE_INTERVAL_SECONDS or since < 0

    def prune(self, conn: Conn, now: datetime | None = None) -> PrunedHistory:
        """One bounded pass over the history past its retention, on the database clock."""
        at = schedule_rules.db_now(conn, now)
        history.ensure_ahead(conn, at.astimezone(UTC).date())
        runs_before = _before(at, self.settings.retention_days)
        days = 0
        if runs_before is not None:
            # A day goes once all of it is older than the retention.
            dropped = history.drop_expired(
                conn,
                keep_since=runs_before.astimezone(UTC).date(),
                archive_to=self.settings.archive_dir,
                limit=DROP_DAYS,
            )
            days = len(dropped.days)
            for day in dropped.kept_for_active:
                log.info("history of %s kept past its retention: an active DAG step reads it",
                         day, extra={"day": str(day)})  # fmt: skip
        # A day the mover has finished writing: runs that ended in it moved out of the hot
        # window (dead letters move later, a few rows against a settled day).
        written = at - timedelta(minutes=self.settings.hot_minutes) - SETTLE_MARGIN
        settled = history.settle_days(
            conn, written_before=written.astimezone(UTC).date(), limit=SETTLE_PARTITIONS
        )
        fires = 0
        fires_before = _before(at, self.settings.keep_fires_days)
        if fires_before:
            for _ in range(FIRE_PRUNE_SLICES):
                count, self._fires_after = schedules.prune_fires(
                    conn, fires_before, self._fires_after, FIRE_PRUNE_SLICE
                )
                fires += count
                if self._fires_after is None:  # walked every schedule: start over next pass
                    break
        sessions = links = 0
        for _ in range(PRUNE_BATCHES):
            signed = retention.prune_sign_ins(conn, now=now, limit=PRUNE_BATCH)
            sessions += signed.sessions
            links += signed.links
            if signed.sessions < PRUNE_BATCH and signed.links < PRUNE_BATCH:
                break
        messages = 0
        if runs_before:  # kept as long as the runs they speak of
            for _ in range(PRUNE_BATCHES):
                count = outbox.prune(conn, runs_before, PRUNE_BATCH)
                messages += count
                if count < PRUNE_BATCH:
                    break
        pruned = PrunedHistory(days, len(settled), fires, sessions, links, messages)
        if pruned != PrunedHistory():
            log.info(
                "pruned history: %d days of runs (%d finished days' partitions vacuumed), "
                "%d ledger rows, %d expired sessions, %d expired sign-in links, "
                "%d notification messages",
                pruned.days,
                pruned.settled,
                pruned.fires,
                pruned.sessions,
                pruned.sign_in_links,
                pruned.notifications,
            )
        return pruned

    def run_forever(self, url: str, stop: threading.Event) -> None:
        run_periodic("reaper", url, self.settings.reaper_interval_seconds, self.run_once, stop)


def _before(now: datetime, days: float | None) -> datetime | None:
    return None if days is None else now - timedelta(days=days)
