"""The reaper: returns runs whose lease expired to pending (or failed), ages priorities,
prunes history, fills the job statistics roll-up, moves the dependencies' circuit breakers,
queues and delivers notifications (`app.notify.outbox`).

Purpose: a worker that dies, stalls or loses its network stops heartbeating; once its
lease expires the reaper hands the run to another worker (or ends it when its attempts
are exhausted, or when it was cancelled). It also raises the effective priority of runs
that have waited too long, so low-priority work cannot starve. Every few minutes it
deletes the history past its retention (SUNDIAL_KEEP_RUNS_DAYS, SUNDIAL_KEEP_FAILED_DAYS,
SUNDIAL_KEEP_FIRES_DAYS; sent notification messages with the runs) and the web sessions and
sign-in links that expired, a bounded
amount per pass so reaping leases is never held up.
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
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.core.config import Settings
from app.core.db import Conn
from app.notify import outbox
from app.notify.outbox import DeliveryReport, Notifier
from app.observability import job_stats
from app.runs import breakers, queues, retention, transitions
from app.runs.counters import LEASE_EXPIRIES
from app.scheduling import schedule_rules, schedules
from app.services.periodic import run_periodic
from app.services.reconnecting import DB_ERRORS

log = logging.getLogger(__name__)

REAP_BATCH = 1000
PRUNE_INTERVAL_SECONDS = 300.0
PRUNE_BATCH = 1000  # runs (and DAG runs) per statement
PRUNE_BATCHES = 20  # statements per pass, at most
FIRE_PRUNE_SLICE = 500  # schedules whose ledger one statement prunes
FIRE_PRUNE_SLICES = 20  # statements per pass, at most


@dataclass(frozen=True)
class PrunedHistory:
    runs: int = 0  # DAG steps included
    dag_runs: int = 0
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
        pruned = None
        at = schedule_rules.db_now(conn, now)  # the clock the tick is given, like its statements
        if self._prune_due(at):
            self._last_prune = at
            pruned = self.prune(conn, at)
        return ReaperReport(reaped, aged, pruned, expired, self._notify(conn, now))

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
        runs_before = _before(at, self.settings.keep_runs_days)
        failed_before = _before(at, self.settings.keep_failed_days)
        pruned_runs = pruned_dags = 0
        if runs_before or failed_before:
            for _ in range(PRUNE_BATCHES):
                batch = retention.prune(
                    conn, runs_before=runs_before, failed_before=failed_before, limit=PRUNE_BATCH
                )
                pruned_runs += batch.runs
                pruned_dags += batch.dag_runs
                if batch.lone_runs < PRUNE_BATCH and batch.dag_runs < PRUNE_BATCH:
                    break  # neither statement found a full batch: nothing more is due
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
        pruned = PrunedHistory(pruned_runs, pruned_dags, fires, sessions, links, messages)
        if pruned != PrunedHistory():
            log.info(
                "pruned history: %d runs (%d DAG runs), %d ledger rows, "
                "%d expired sessions, %d expired sign-in links, %d notification messages",
                pruned.runs,
                pruned.dag_runs,
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
