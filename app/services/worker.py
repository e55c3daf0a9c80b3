"""The worker: claims runs, executes them, keeps their leases alive, records how they end.

One asyncio loop per process runs four cooperating parts:

- the fetcher claims as many due runs as there are free slots, in one statement, woken by
  `LISTEN sundial_runs` (a listener thread) with a poll fallback; while the fetcher is
  idle, the listener thread claims itself, on its own connection (see `listen_once`);
- each claimed run executes as a task through `Executors` (async / thread / process /
  subprocess), which enforce timeouts and stop a job on request;
- the finisher writes outcomes in batches: every finish that accumulated while the
  previous batch was being written goes in the next one (two statements at most);
- the heartbeat runs in its own OS thread with its own connection, so a job that blocks
  the event loop or holds the GIL cannot starve it: one statement renews every held lease
  and returns cancel requests and leases this worker lost (those jobs are stopped at once).

Each loop is a small wait around one step that tests call in-process: `fetch_once`,
`finish_once`, `heartbeat_once` and `listen_once` (after `listen`). The fetcher and the
executing are here; the finisher, the listener and the heartbeat are parts of their own
(`app.services.worker_finisher`, `worker_listener`, `worker_heartbeat`) over the state they
share (`app.services.worker_state`).

SIGTERM stops claiming, lets running jobs finish within the grace period, then stops the
rest and hands their runs back without using up an attempt. Database calls are plain
psycopg calls on worker threads (`asyncio.to_thread`), so the loop never waits on I/O, and
any connection error is retried with backoff: leases are time-based, so work in flight
survives a short outage or a PostgreSQL restart.

A worker holds `WORKER_CONNECTIONS` database connections: claim, finish, heartbeat and
listener. It opens all of them at start-up and exits with an error naming the one the
server refused (too few `max_connections`). It claims only what it can record: after any
connection trouble, its finish and heartbeat connections must answer before it claims
again, so a worker short of connections leaves runs to workers that can finish them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Coroutine, Sequence
from datetime import datetime
from typing import Any

from app.core import collector
from app.core.config import Settings
from app.core.db import Conn
from app.core.limits import DEFAULT_QUEUE
from app.core.sql import query
from app.executors import Executors
from app.executors.outcomes import storable
from app.handlers import default_registry, load_modules
from app.handlers.jobs import ClaimedRun, Outcome, OutcomeStatus
from app.runs import queue_limits, run_logs, transitions
from app.runs.transitions import Finish
from app.services.reconnecting import DB_ERRORS, Reconnecting
from app.services.worker_finisher import Finisher
from app.services.worker_heartbeat import Heartbeat
from app.services.worker_listener import NoticeListener
from app.services.worker_state import InFlight, wait_for

log = logging.getLogger(__name__)


LOOP_LAG_SAMPLE_SECONDS = 1.0
MAX_IDLE_SLEEP_SECONDS = 5.0
MIN_IDLE_SLEEP_SECONDS = 0.005
LIMITED_RECHECK_SECONDS = 0.25  # idle, in a queue whose due runs a limit holds back
LIMITED_GATHER_SECONDS = 0.05  # at most, to gather free slots for a limited queue's claim
# Behind a transaction pooler (only there: directly, psycopg keeps statements prepared), a
# claim into fewer than half the slots waits until this long after the one before, and a
# claim that found fewer due runs than it asked for waits in any case: each claim is planned
# afresh there (0.5 ms, twice its execution), and workers claimed one or two runs at a
# time, as each slot freed or each notification came (seed_day: 95,000 claims for 281,000
# runs).
CLAIM_PACE_SECONDS = 0.05
WORKER_CONNECTIONS = 4  # claim, finish, heartbeat, listener
CLAIM_PAUSE_SECONDS = 0.5  # between checks while the finish or heartbeat connection is down
# During a database outage at shutdown, finishes and hand-backs are retried this long past
# the grace period; then the worker exits and the reaper re-runs what it could not record.
GIVE_UP_AFTER_GRACE_SECONDS = 10.0


class WorkerCrashed(RuntimeError):
    """A worker loop died of an unexpected error; the process exits non-zero."""


class NotEnoughConnections(RuntimeError):
    """The server refused one of the connections a worker needs; the process exits 1."""


class Worker(Finisher, NoticeListener, Heartbeat):
    # ---- lifecycle ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, force_stop: asyncio.Event | None = None) -> None:
        """Work until `stop` is set, then shut down gracefully (see the module docstring)."""
        await self.start()
        collector.freeze_start_up()  # see app/core/collector.py: a latency tail otherwise
        self._threads = [
            threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True),
            threading.Thread(target=self._listen_loop, name="listener", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        log.info(
            "worker started: queue %s, concurrency %d, handlers %s",
            self.queue,
            self.concurrency,
            ", ".join(self.handler_names),
            extra={"worker": self.id},
        )
        finisher = asyncio.create_task(self._finish_loop())
        lag = asyncio.create_task(self._measure_loop_lag())
        fetcher = asyncio.create_task(self._fetch_loop())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({stopped, fetcher, finisher}, return_when=asyncio.FIRST_COMPLETED)
        for task in (fetcher, finisher):
            if task.done() and task.exception() is not None:
                # A bug or an unexpected database error: die loudly so the process
                # manager restarts us, rather than linger without claiming.
                stopped.cancel()
                self._threads_stop.set()
                await self.executors.close(kill=True)
                raise WorkerCrashed(f"worker loop failed: {task.exception()!r}") from (
                    task.exception()
                )
        log.info("worker stopping: no new claims", extra={"worker": self.id})
        with self._slots:  # the listener reserves no slot after this
            self._stopping = True
        self._wake.set()
        self._slot_freed.set()
        self._loop.call_later(
            self.settings.shutdown_grace_seconds + GIVE_UP_AFTER_GRACE_SECONDS,
            setattr,
            self,
            "_abandon_db",
            True,
        )
        await fetcher
        await self._listener_handed_over()
        await self._drain(force_stop or asyncio.Event())
        self._finish_ready.set()
        await finisher
        lag.cancel()
        await self.close()

    async def start(self) -> None:
        """Register, open every connection and start the executors: what `run` does
        first, and all a test needs before calling the loops' steps in-process."""
        self._loop = asyncio.get_running_loop()
        log.info(
            "worker needs %d database connections (claim, finish, heartbeat, listener)",
            WORKER_CONNECTIONS,
            extra={"worker": self.id},
        )
        await asyncio.to_thread(self._claimer.call, self._register)
        await asyncio.to_thread(self._open_connections)
        # Process children start when the first process job comes: most workers run none.
        await self.executors.start(processes=False)
        run_logs.install(self.logs)

    async def close(self) -> None:
        """Stop the executors (killing what still runs), mark this worker stopped and
        close its connections: what `run` does last."""
        self._threads_stop.set()
        await self.executors.close(kill=True)
        run_logs.uninstall(self.logs)
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 5)
        try:
            await asyncio.to_thread(self._finisher.call, self._unregister)
        except DB_ERRORS:
            log.warning("could not mark this worker stopped in the database")
        self._claimer.close()
        self._finisher.close()
        if not self._threads:  # the heartbeat and listener threads close their own
            self._beat.close()
            if self._listener is not None:
                self._listener.close()
        log.info("worker stopped", extra={"worker": self.id})

    def _open_connections(self) -> None:
        """Open the other connections before any claim: finish and heartbeat at once (each
        costs the server a new backend), then the listener. The server answered the claim
        connection, so one it refuses now means too few connections for this fleet."""
        steps = [{"finish": self._finisher, "heartbeat": self._beat}]
        if self._listener is not None:
            steps.append({"listener": self._listener})
        for step in steps:
            for name, exc in _open_all(step).items():
                if not isinstance(exc, DB_ERRORS):
                    raise exc
                self._claimer.check(self._unregister)
                for opened in (self._claimer, self._finisher, self._beat, self._listener):
                    if opened is not None:
                        opened.close()
                reason = " ".join(str(exc).split())[:300]
                raise NotEnoughConnections(
                    f"the worker needs {WORKER_CONNECTIONS} database connections (claim, "
                    f"finish, heartbeat, listener) and the server refused its {name} "
                    f"connection: {reason}. Raise max_connections on the server or run fewer "
                    "processes (docs/operations.md: Database connections)."
                ) from exc

    async def _listener_handed_over(self) -> None:
        """Wait (within the grace period) for a claim the listener made before the stop to
        reach the loop, so the drain runs or hands back its runs too."""
        deadline = self._loop.time() + self.settings.shutdown_grace_seconds
        while self._listener_claiming and (remaining := deadline - self._loop.time()) > 0:
            self._handed_over.clear()
            await wait_for(self._handed_over, remaining)

    async def _drain(self, force_stop: asyncio.Event) -> None:
        """Let running jobs finish within the grace period, then hand the rest back."""
        deadline = self._loop.time() + self.settings.shutdown_grace_seconds
        while self._in_flight and not force_stop.is_set():
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                break
            self._slot_freed.clear()
            try:
                await asyncio.wait_for(
                    _first(self._slot_freed.wait(), force_stop.wait()), remaining
                )
            except TimeoutError:
                break
        if not self._in_flight:
            return
        unfinished = list(self._in_flight.values())
        for item in unfinished:
            item.handed_back = True
            self.executors.cancel(item.job.run_id, item.job.attempt)
        held = [(i.job.run_id, i.job.attempt) for i in unfinished]
        released = await asyncio.to_thread(
            self._finisher.call, transitions.release_many, self.id, held
        )
        log.info(
            "handed %d unfinished runs back to the queue",
            len(released),
            extra={"worker": self.id, "count": len(released)},
        )
        tasks = [i.task for i in unfinished if i.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    # ---- fetch and execute ----------------------------------------------------------------

    async def _fetch_loop(self) -> None:
        while not self._stopping:
            free = self._free_slots()
            if free <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            if self._queue_limited and self._in_flight and free < self._enough():
                # A limited queue's claims take turns and each counts its running runs:
                # fewer, larger claims. Gather freed slots for a moment first.
                await self._gather_slots()
                if (free := self._free_slots()) <= 0:
                    continue
            elif (
                self._paced
                and not self._queue_limited
                and (free < self._enough() or not self._claim_filled)
            ):
                await self._pace_claims()
                if (free := self._free_slots()) <= 0:
                    continue
            self._wake.clear()
            self._finish_recorded.clear()  # from here on, one cuts a limited queue's wait short
            try:
                jobs = await self.fetch_once()
            except DB_ERRORS:
                return  # only raised once the worker is closing
            if jobs is None:
                await self._pause_claims()
                continue
            if len(jobs) == free or self._stopping:
                continue  # there may be more due runs: claim again when slots free up
            await self._idle_wait()

    async def _gather_slots(self) -> None:
        deadline = self._loop.time() + LIMITED_GATHER_SECONDS
        while (
            (remaining := deadline - self._loop.time()) > 0
            and self._in_flight
            and self._free_slots() < self._enough()
        ):
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._slot_freed.wait()

    async def _pace_claims(self) -> None:
        """Until CLAIM_PACE_SECONDS after the last claim began: while the last claim found
        fewer due runs than it asked for, to let more come due; else until enough slots
        are free."""
        deadline = self._claim_began + CLAIM_PACE_SECONDS
        # Few due runs: meanwhile a notification's runs are the listener's to claim, at once
        # and on its own connection (direct, so its claim stays prepared).
        self._fetcher_idle = not self._claim_filled
        try:
            while not self._stopping and (remaining := deadline - time.monotonic()) > 0:
                if self._claim_filled and self._free_slots() >= self._enough():
                    return
                self._slot_freed.clear()
                await wait_for(self._slot_freed, remaining)
        finally:
            self._fetcher_idle = False

    async def fetch_once(self) -> list[ClaimedRun] | None:
        """Claim as many due runs as there are free slots and start executing them. None
        when claims are paused because their outcomes could not be recorded."""
        free = self._reserve_slots()
        if not free:
            return []
        self._claim_began = time.monotonic()
        self.stats.claims += 1
        try:
            jobs = await asyncio.to_thread(self._claimer.call, self._claim_recordable, free)
        finally:
            self._unreserve_slots(free)
        if jobs is None:
            return None
        self._claim_filled = len(jobs) == free
        if self._claims_paused:
            self._claims_paused = False
            log.info("claims resumed", extra={"worker": self.id})
        for job in jobs:
            self._start(job)
        self.stats.claimed += len(jobs)
        return jobs

    async def wait_executed(self) -> None:
        """Wait until every run claimed so far has executed (its finish may be unwritten)."""
        tasks = [i.task for i in self._in_flight.values() if i.task is not None]
        if tasks:
            await asyncio.wait(tasks)

    def _claim_recordable(self, conn: Conn, free: int) -> list[ClaimedRun] | None:
        """Claim up to `free` runs, or None when this worker could not record them: on a
        new claim connection, or after finish or heartbeat trouble, those two connections
        must answer first (a run claimed without them is only held hostage). While finishes
        wait to be recorded and the finish connection is failing, nothing, even once the
        server answers again: the reaper may have re-queued one of those runs meanwhile,
        and its late completion must be written before this worker could claim it again
        (then the completion would be discarded and the run run twice)."""
        if self._finisher.failing and (self._finishes or self._writing_finishes):
            return None
        if conn is not self._checked_claim_conn or self._finisher.failing or self._beat.failing:
            if not (self._finisher.check(_ping) and self._beat.check(_ping)):
                return None
            self._checked_claim_conn = conn
        claimed = transitions.claim(
            conn, self.id, free, self.lease_seconds, busy=bool(self._in_flight), queue=self.queue
        )
        self._queue_limited = queue_limits.limited(conn, self.queue)  # read by that claim
        return claimed

    async def _pause_claims(self) -> None:
        if not self._claims_paused:
            self._claims_paused = True
            log.warning(
                "claims paused: the finish or heartbeat connection is down, so new runs "
                "could not be recorded; running ones go on",
                extra={"worker": self.id},
            )
        # Notifications do not cut the pause short (each check may open a connection);
        # a stop does (it sets `_wake` after `_stopping`).
        deadline = self._loop.time() + CLAIM_PAUSE_SECONDS
        while not self._stopping and (remaining := deadline - self._loop.time()) > 0:
            self._wake.clear()
            await wait_for(self._wake, remaining)

    async def _idle_wait(self) -> None:
        """Sleep until a notification, the next due run, or the poll interval."""
        timeout = self.settings.poll_seconds
        try:
            next_at = await asyncio.to_thread(
                self._claimer.call, _seconds_until_next_due, self.queue
            )
        except DB_ERRORS:
            return
        if next_at is not None and next_at <= 0 and self._queue_limited:
            # Due runs that a limit holds back: a place comes free when a finish is
            # recorded, this worker's (cleared before the claim) or another's (no
            # notification: look again shortly), and a rate's next start when it is due.
            recheck = LIMITED_RECHECK_SECONDS
            if (next_start := queue_limits.seconds_to_next_start(self.queue)) is not None:
                recheck = min(recheck, max(MIN_IDLE_SLEEP_SECONDS, next_start))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(recheck):
                    await _first(self._wake.wait(), self._finish_recorded.wait())
            return
        if next_at is not None:
            # Due runs that the claim did not get are locked by another worker's claim in
            # progress: wait a moment (or for a notification) rather than spin.
            timeout = min(max(next_at, MIN_IDLE_SLEEP_SECONDS), MAX_IDLE_SLEEP_SECONDS)
            if next_at <= 0 and self._in_flight:
                # Or a suspect waits first in line for a worker with nothing else to do:
                # this one drains, and claims again when a run of its own ends.
                self._slot_freed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(MAX_IDLE_SLEEP_SECONDS):
                        await _first(self._wake.wait(), self._slot_freed.wait())
                return
        self._fetcher_idle = True
        try:
            await wait_for(self._wake, timeout)
        finally:
            self._fetcher_idle = False

    def _start(self, job: ClaimedRun) -> None:
        item = InFlight(job)
        self._in_flight[job.run_id] = item
        if job.crash_count:
            self._suspects_in_flight += 1
        item.task = self._loop.create_task(self._execute(item))
        self._finish_ready.set()  # the finisher now writes log lines as they come

    async def _execute(self, item: InFlight) -> None:
        job = item.job
        key = (job.run_id, job.attempt)
        run_logs.CURRENT.set(key)  # this task's own context: its handler's lines
        try:
            outcome = await self.executors.run(job)
        except Exception as exc:  # executors never raise; if they do, the attempt fails
            log.exception("executor error", extra={"run_id": job.run_id, "attempt": job.attempt})
            outcome = Outcome(status=OutcomeStatus.FAILED, error=f"executor error: {exc!r}")
        run_logs.CURRENT.set(None)
        if outcome.logs:  # from a process or subprocess child
            run_logs.add_child_lines(self.logs, key, outcome.logs)
        self.logs.close(key)
        if self._in_flight.pop(job.run_id, None) is not None and job.crash_count:
            self._suspects_in_flight -= 1
        self._slot_freed.set()
        if item.handed_back or item.lost:
            return
        outcome = storable(outcome, self.settings.max_result_bytes)
        if outcome.status in (OutcomeStatus.FAILED, OutcomeStatus.TIMED_OUT):
            # one line an operator can search for (JSON by default), whatever happens next
            log.warning(
                "run %s attempt %s %s: %s",
                job.run_id,
                job.attempt,
                outcome.status.value.replace("_", " "),
                outcome.error,
                extra={
                    "run_id": job.run_id,
                    "attempt": job.attempt,
                    "handler": job.handler,
                    "outcome": outcome.status.value,
                    "error": outcome.error,
                },
            )
        elif outcome.status is OutcomeStatus.SNOOZED:
            log.info(
                "run %s attempt %s snoozed for %gs: %s",
                job.run_id,
                job.attempt,
                outcome.snooze_seconds,
                outcome.snooze_reason,
                extra={"run_id": job.run_id, "attempt": job.attempt, "outcome": "snoozed"},
            )
        self._finishes.append(Finish(job.run_id, job.attempt, outcome, bool(job.crash_count)))
        self._finish_ready.set()

    async def _measure_loop_lag(self) -> None:
        while True:
            await asyncio.sleep(LOOP_LAG_SAMPLE_SECONDS)
            scheduled = self._loop.time()
            ran = self._loop.create_future()
            self._loop.call_soon(ran.set_result, None)
            await ran
            self.stats.loop_lag_seconds = self._loop.time() - scheduled


def _open_all(conns: dict[str, Reconnecting]) -> dict[str, BaseException]:
    """Open the connections, in parallel threads if several; the errors of those refused,
    in the order given."""
    errors: dict[str, BaseException] = {}

    def open_one(name: str, conn: Reconnecting) -> None:
        try:
            conn.open()
        except BaseException as exc:
            errors[name] = exc

    threads = [threading.Thread(target=open_one, args=item) for item in conns.items()]
    for thread in threads[1:]:
        thread.start()
    if threads:
        threads[0].run()  # the first one on this thread
    for thread in threads[1:]:
        thread.join()
    return {name: errors[name] for name in conns if name in errors}


def _ping(conn: Conn) -> None:
    conn.execute(query("workers", "worker_ping"))


def _seconds_until_next_due(conn: Conn, queue: str, now: datetime | None = None) -> float | None:
    row = conn.execute(
        query("workers", "worker_seconds_until_next_due"), {"queue": queue, "now": now}
    ).fetchone()
    return None if row is None or row["wait"] is None else float(row["wait"])


async def _first(*aws: Any) -> None:
    """Wait until the first of `aws` completes; cancel the others."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


def build_worker(
    settings: Settings, url: str, concurrency: int | None = None, queue: str = DEFAULT_QUEUE
) -> Worker:
    concurrency = concurrency or settings.worker_concurrency
    load_modules(settings.handler_modules)
    executors = Executors(
        default_registry,
        thread_workers=concurrency,
        process_workers=min(concurrency, os.cpu_count() or 1),
        handler_modules=settings.handler_modules,
    )
    return Worker(
        settings,
        url,
        concurrency=concurrency,
        executors=executors,
        handler_names=default_registry.names(),
        handler_args=default_registry.schemas(),
        queue=queue,
    )


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """`asyncio.run(main)`, except that a `SystemExit` or `KeyboardInterrupt` a job raised
    out of the event loop is logged and the loop goes on.

    asyncio lets those two escape from any task or callback: one raised in a task an async
    handler started (`asyncio.gather`, `create_task`) would otherwise end the worker and
    leave every run it holds to the reaper. A handler awaiting that task gets the exception
    as well, so its attempt fails with it. The worker itself stops on signals it handles
    (`add_signal_handler`), never by these exceptions; `main` raising one still ends it.
    """
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        task = loop.create_task(main)
        while not task.done():
            try:
                loop.run_until_complete(task)
            except (SystemExit, KeyboardInterrupt) as exc:
                if not task.done():
                    log.error(
                        "a job raised %s out of the event loop (in a task or callback it "
                        "started); the worker goes on",
                        type(exc).__name__,
                        exc_info=exc,
                    )
        task.result()


def run_worker(
    settings: Settings,
    url: str,
    concurrency: int | None = None,
    queues: Sequence[tuple[str, int | None]] | None = None,
) -> int:
    """Entry point of `sundial worker`: run until SIGTERM/SIGINT (a second one: no grace).

    One worker per queue served, each with its own slots, connections and executors, on
    one event loop: a queue's slots are its own, so a flood in one never starves another."""
    served = queues or [(DEFAULT_QUEUE, concurrency)]
    workers = [build_worker(settings, url, slots or concurrency, queue) for queue, slots in served]
    worker = workers[0]  # names the process in its logs
    collector.collect_less_often()  # the process's own: tests keep Python's default

    async def main() -> None:
        stop, force = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            if stop.is_set():
                log.info("received %s again: stopping without grace", sig.name)
                force.set()
            else:
                log.info("received %s", sig.name)
                stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        await asyncio.gather(*(w.run(stop, force) for w in workers))

    try:
        run_loop(main())
    except NotEnoughConnections as exc:
        log.error("%s", exc, extra={"worker": worker.id})
        return 1
    except WorkerCrashed:
        log.exception("worker crashed", extra={"worker": worker.id})
        return 1
    return 0
