"""A worker's notification listener: its own thread and connection `LISTEN` for new runs,
wake the fetcher, and, while the fetcher is idle, claim what a notification announced on
the listener's own connection (its server process is awake). Tests call `listen` and
`listen_once` in-process.
"""

from __future__ import annotations

import logging
import time

from app.core.db import Conn
from app.handlers.jobs import ClaimedRun
from app.runs import transitions
from app.services.reconnecting import DB_ERRORS
from app.services.worker_state import WorkerState

# The worker's own logger: its lines read the same whichever part wrote them.
log = logging.getLogger("app.services.worker")

LISTEN_TIMEOUT_SECONDS = 0.5  # how soon the listener thread sees the worker stopping


class NoticeListener(WorkerState):
    """The listener part of a worker (`app.services.worker.Worker`)."""

    def _listen_loop(self) -> None:
        if self._listener is None:  # behind a transaction pooler, no direct URL: poll
            return
        try:
            self._listener.call(self._relay_notifications)
        except DB_ERRORS:
            pass  # raised only once stopping, during an outage
        finally:
            self._listener.close()

    def _relay_notifications(self, conn: Conn) -> None:
        """Wake the fetcher on every notification until the worker stops; and once on
        (re)connecting, for the notifications missed while not listening."""
        self.listen(conn)
        while not self._threads_stop.is_set():
            self.listen_once(conn)

    def listen(self, conn: Conn) -> None:
        """Subscribe `conn` to new-run notifications and wake the fetcher once."""
        conn.execute(f"LISTEN {transitions.NOTIFY_CHANNEL}")
        self._loop.call_soon_threadsafe(self._wake.set)

    def listen_once(self, conn: Conn, timeout: float = LISTEN_TIMEOUT_SECONDS) -> bool:
        """Wait up to `timeout` for one notification on `conn` (after `listen`); return
        True if one came, having woken the fetcher, and claimed what the notification
        announced if the fetcher was idle."""
        if not any(True for _ in conn.notifies(timeout=timeout, stop_after=1)):
            return False
        jobs: list[ClaimedRun] = []
        reserved = self._reserve_for_notice()
        try:
            if reserved:
                jobs = self._claim_on_notice(conn, reserved)
        finally:  # a database error goes on to `Reconnecting`, which listens again
            self._loop.call_soon_threadsafe(self._take_noticed, jobs, reserved)
        return True

    def _reserve_for_notice(self) -> int:
        """The free slots, reserved for the listener's claim, while the fetcher is idle
        and its claims can be recorded (the claim connection was checked, the finish and
        heartbeat connections answer); else 0."""
        with self._slots:
            if not self._fetcher_idle or self._stopping or self._claims_paused:
                return 0
            if self._checked_claim_conn is None or self._finisher.failing or self._beat.failing:
                return 0
            free = max(0, self._free_slots())
            self._claiming += free
            self._listener_claiming += free
            if free:
                self._claim_began = time.monotonic()  # the fetcher's next claim waits for it
            return free

    def _claim_on_notice(self, conn: Conn, limit: int) -> list[ClaimedRun]:
        """Claim on the listener's own connection: its server process is awake (it has
        just sent the notification), where the fetcher's claim would first wake the event
        loop, a claim thread and a sleeping server process (enqueue to handler p50 2.6 ms
        instead of 3.3 on a quiet machine)."""
        try:
            return transitions.claim(
                conn,
                self.id,
                limit,
                self.lease_seconds,
                busy=bool(self._in_flight),
                queue=self.queue,
            )
        except DB_ERRORS:
            raise
        except Exception:  # a bug: the fetcher, woken anyway, claims instead
            log.exception("the listener could not claim", extra={"worker": self.id})
            return []

    def _take_noticed(self, jobs: list[ClaimedRun], reserved: int) -> None:
        """(On the loop.) Start what the listener claimed and release its reservation;
        wake the fetcher: more may be due, or a run due later may have come."""
        for job in jobs:
            self._start(job)
        self.stats.claimed += len(jobs)
        if reserved:
            self._claim_filled = len(jobs) == reserved
        with self._slots:
            self._claiming -= reserved
            self._listener_claiming -= reserved
        self._handed_over.set()
        self._wake.set()
