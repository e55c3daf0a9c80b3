"""A worker's finisher: writes how attempts ended, in batches (every finish that accumulated
while the previous batch was being written goes in the next one, three statements at most),
with the handlers' log lines, their progress reports (the latest of each attempt, about once
a second: `app.runs.run_progress`) and the process runs a pool child began; a finish may
claim the dependents it released (see `transitions.DownstreamClaim`). Tests call
`finish_once`.
"""

from __future__ import annotations

import asyncio
import logging
import time

import psycopg

from app.core.db import Conn
from app.executors.outcomes import unstorable
from app.handlers.jobs import OutcomeStatus
from app.runs import run_logs, run_progress, transitions
from app.runs.transitions import Finish
from app.services.reconnecting import DB_ERRORS
from app.services.worker_state import WorkerState, wait_for

# The worker's own logger: its lines read the same whichever part wrote them.
log = logging.getLogger("app.services.worker")

# Behind a transaction pooler, writes of fewer finishes than half the slots go at most this
# often: nothing stays prepared there, so each write is planned afresh (0.85 ms for
# run_complete_many, twice its execution), and writes of one or two finishes each spent the
# database on plans.
FINISH_WRITE_SECONDS = 0.05


class Finisher(WorkerState):
    """The finisher part of a worker (`app.services.worker.Worker`)."""

    async def _finish_loop(self) -> None:
        while True:
            if not self._finishes:
                if self._stopping and not self._in_flight:
                    await self._write_logs()
                    return
                # While runs are in flight, wake now and then to write their log lines.
                busy = self._in_flight or self.logs.pending()
                await wait_for(self._finish_ready, run_logs.FLUSH_SECONDS if busy else None)
                self._finish_ready.clear()
                try:
                    await self._write_logs()
                except DB_ERRORS:
                    return
                continue
            await self._pace_finish_writes()
            try:
                await self.finish_once()
            except DB_ERRORS:
                return

    async def _pace_finish_writes(self) -> None:
        """Gather finishes until enough wait or FINISH_WRITE_SECONDS have passed since
        the last write began; a first finish after a quiet spell goes at once. Not for a
        limited queue: there a finish frees a place that a run of the same key waits for."""
        deadline = self._finish_write_began + FINISH_WRITE_SECONDS
        while (
            self._paced
            and not (self._stopping or self._queue_limited)
            and len(self._finishes) < self._enough()
            and (remaining := deadline - time.monotonic()) > 0
        ):
            self._finish_ready.clear()
            await wait_for(self._finish_ready, remaining)

    async def finish_once(self) -> list[Finish]:
        """Write every finish waiting to be written, in one batch; return those that won
        (a finish loses when its attempt no longer holds the run)."""
        batch, self._finishes = self._finishes, []
        if not batch:
            return []
        self._finish_write_began = time.monotonic()
        self.stats.finish_writes += 1
        self._slot_freed.set()
        self._writing_finishes = True  # from here until recorded (logs first)
        try:
            # An ended attempt's lines and last progress are stored before its finish.
            await self._write_logs(all_progress=True)
            claim = self._downstream_claim()
            reserved = claim.limit
            try:
                won = await asyncio.to_thread(self._finisher.call, self._record, batch, claim)
            except DB_ERRORS:
                log.error("could not record %d finishes before shutdown", len(batch))
                raise
            finally:
                self._unreserve_slots(reserved)
                self._slot_freed.set()  # the fetcher may wait for the slots reserved here
        finally:
            self._writing_finishes = False
        self._finish_recorded.set()
        for job in claim.jobs:
            self._start(job)
        self.stats.claimed += len(claim.jobs)
        self._count(batch, won)
        return won

    def _downstream_claim(self) -> transitions.DownstreamClaim:
        """How many of the DAG steps its finishes release the finisher may claim: the free
        slots, none while claims are paused or the worker is stopping."""
        claiming = not (self._stopping or self._claims_paused or self._beat.failing)
        return transitions.DownstreamClaim(
            self._reserve_slots() if claiming else 0, self.lease_seconds, self.queue
        )

    def _on_begin(self, attempt: tuple[int, int]) -> None:
        self._begun.append(attempt)
        self._finish_ready.set()

    async def _write_logs(self, *, all_progress: bool = False) -> None:
        """Write the log lines captured so far, in one statement, on the finish connection,
        mark begun the process runs a child took since, and write the latest progress
        reports if a second has passed since the last write (or `all_progress`)."""
        begun, self._begun = self._begun, []
        if begun:
            await asyncio.to_thread(self._finisher.call, transitions.mark_begun, self.id, begun)
        lines = self.logs.drain()
        if lines:
            await asyncio.to_thread(self._finisher.call, self._append_logs, lines)
        due = time.monotonic() - self._progress_written >= run_progress.WRITE_SECONDS
        if self.progress.pending() and (due or all_progress):
            self._progress_written = time.monotonic()
            reports = self.progress.drain()
            await asyncio.to_thread(self._finisher.call, self._write_progress, reports)

    def _write_progress(
        self, conn: Conn, reports: dict[tuple[int, int], run_progress.Report]
    ) -> None:
        try:
            transitions.report_progress(conn, self.id, reports)
        except DB_ERRORS:
            raise  # the connection or the server: `Reconnecting` retries the batch
        except psycopg.Error as exc:  # about the data: the reports are dropped, not the worker
            log.warning("could not store %d progress reports: %s", len(reports), exc)

    def _append_logs(self, conn: Conn, lines: list[run_logs.LogLine]) -> None:
        try:
            run_logs.append(conn, lines)
        except DB_ERRORS:
            raise  # the connection or the server: `Reconnecting` retries the batch
        except psycopg.Error as exc:  # about the data: the lines are dropped, not the worker
            log.warning("could not store %d log lines: %s", len(lines), exc)

    def _record(
        self, conn: Conn, batch: list[Finish], claim: transitions.DownstreamClaim | None = None
    ) -> list[Finish]:
        """Write a batch of finishes (claiming into `claim` the DAG steps they release); if
        the database refuses the batch, write them one by one so that an outcome it cannot
        store fails its own run and no other."""
        won = self._try_finish(conn, batch, claim)
        if not isinstance(won, Exception):
            return won
        if len(batch) > 1:
            log.warning(
                "a batch of %d finishes was refused (%s: %s); writing them one by one",
                len(batch),
                type(won).__name__,
                won,
            )
            return [w for finish in batch for w in self._record(conn, [finish], claim)]
        return self._record_refused(conn, batch[0], won)

    def _record_refused(self, conn: Conn, finish: Finish, exc: Exception) -> list[Finish]:
        """Record an outcome the database refused as a failure of its run saying why."""
        where = {"run_id": finish.run_id, "attempt": finish.attempt, "worker": self.id}
        log.error(
            "the outcome could not be stored (%s); recording the run failed", exc, extra=where
        )
        failure = Finish(finish.run_id, finish.attempt, unstorable(finish.outcome, exc))
        won = self._try_finish(conn, [failure])
        if isinstance(won, Exception):
            log.error(
                "could not record that failure either (%s); the run ends when its lease expires",
                won,
                extra=where,
            )
            return []
        return won

    def _try_finish(
        self, conn: Conn, batch: list[Finish], claim: transitions.DownstreamClaim | None = None
    ) -> list[Finish] | Exception:
        """`transitions.finish_many`, or the error with which the database refused the outcomes."""
        try:
            return transitions.finish_many(conn, self.id, batch, claim_downstream=claim)
        except psycopg.errors.ProgramLimitExceeded as exc:  # about the data, not the server
            return exc
        except DB_ERRORS:
            raise  # the connection or the server: `Reconnecting` retries the whole batch
        except Exception as exc:
            return exc

    def _count(self, batch: list[Finish], won: list[Finish]) -> None:
        completed = sum(1 for f in won if f.outcome.status == OutcomeStatus.COMPLETED)
        snoozed = sum(1 for f in won if f.outcome.status == OutcomeStatus.SNOOZED)
        self.stats.completed += completed
        self.stats.failed += len(won) - completed - snoozed
        self.stats.lost += len(batch) - len(won)
