"""What a worker's parts share: its settings, connections, runs in flight, slot accounting and
counters, set up once in `WorkerState.__init__`.

The parts are the fetcher and the executing (`app.services.worker.Worker`), the finisher
(`app.services.worker_finisher`), the notification listener (`app.services.worker_listener`)
and the heartbeat with the worker's registration (`app.services.worker_heartbeat`); each is a
class over this state, and the worker is all of them. Free slots are counted here because the
fetcher and the listener's thread both reserve them, under `_slots`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from app.core.config import Settings
from app.core.db import Conn, listen_url
from app.core.limits import DEFAULT_QUEUE
from app.executors import Executors
from app.handlers.jobs import ClaimedRun
from app.runs import run_logs, run_progress
from app.runs.transitions import Finish
from app.services.reconnecting import Reconnecting


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class InFlight:
    job: ClaimedRun
    task: asyncio.Task[None] | None = None
    handed_back: bool = False  # shutdown: the run goes back to the queue, outcome dropped
    lost: bool = False  # heartbeat: another attempt owns the run now


@dataclass
class WorkerStats:
    claimed: int = 0
    claims: int = 0  # the fetcher's claims (the listener's aside)
    finish_writes: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    loop_lag_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)


class WorkerState:
    """The state every part of a worker reads and changes (see the module docstring)."""

    _loop: asyncio.AbstractEventLoop  # set when the worker starts

    def __init__(
        self,
        settings: Settings,
        url: str,
        *,
        concurrency: int,
        executors: Executors,
        handler_names: list[str],
        handler_args: dict[str, dict[str, Any]] | None = None,
        worker_id: str | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> None:
        self.settings = settings
        self.queue = queue  # the one queue it claims from
        self.url = url
        self.concurrency = concurrency
        self.executors = executors
        self.handler_names = handler_names
        self.handler_args = handler_args or {}
        self.id = worker_id or new_worker_id()
        self.lease_seconds = settings.lease_seconds
        self.stats = WorkerStats()
        self._in_flight: dict[int, InFlight] = {}
        self._suspects_in_flight = 0  # runs that crashed before: while one runs, no claims
        self._finishes: list[Finish] = []
        self._writing_finishes = False  # a batch taken from `_finishes`, not yet recorded
        self._stopping = False
        self._abandon_db = False  # shutdown outlasted the grace period during an outage
        # Claims stop retrying once the worker stops; finishes keep trying (during an outage)
        # until the shutdown has run past its grace period.
        self._threads_stop = threading.Event()
        self._claimer = Reconnecting(url, "worker claim", lambda: self._stopping)
        self._finisher = Reconnecting(url, "worker finish", lambda: self._abandon_db)
        self._beat = Reconnecting(url, "worker heartbeat", self._threads_stop.is_set)
        # Behind a transaction pooler with no direct URL there is nothing to LISTEN on: poll.
        listen_on = listen_url(settings, url)
        self._listener = (
            None
            if listen_on is None
            else Reconnecting(
                listen_on,
                "worker listener",
                self._threads_stop.is_set,
                wait=self._threads_stop.wait,
            )
        )
        self._checked_claim_conn: Conn | None = None  # claims on it can be recorded
        self._claims_paused = False
        # Slots a claim under way may fill (the fetcher's, finisher's or listener's); the
        # listener reserves from its own thread, so reservations hold this lock.
        self._claiming = 0
        self._slots = threading.Lock()
        self._fetcher_idle = False  # the fetcher waits for a notification: the listener claims
        self._queue_limited = False  # as the last claim saw it (app.runs.queue_limits)
        self._finish_recorded = asyncio.Event()  # a limited queue's places may be free
        self._listener_claiming = 0  # slots the listener reserved and has not handed over
        self._threads: list[threading.Thread] = []  # heartbeat and listener, once running
        self._wake = asyncio.Event()  # a notification came, or the worker is stopping
        self._slot_freed = asyncio.Event()
        self._finish_ready = asyncio.Event()
        self._finish_write_began = 0.0  # monotonic: finishes are written at a pace
        self._claim_began = 0.0  # monotonic: claims too
        # Claims and finish writes are paced only behind a transaction pooler: directly,
        # psycopg keeps them prepared, and a pace would only add latency.
        self._paced = settings.database_pooler == "transaction"
        self._claim_filled = True  # the last claim got as many runs as it asked for
        self._handed_over = asyncio.Event()  # the listener's claimed runs reached the loop
        self.logs = run_logs.LogCollector()  # handlers' lines, written by the finisher
        executors.on_child_lines = partial(run_logs.add_child_lines, self.logs)  # live
        # Handlers' progress reports, latest per attempt, written by the finisher.
        self.progress = run_progress.ProgressBoard()
        executors.on_progress = self.progress.report
        self._progress_written = 0.0  # monotonic time of the last write
        # Process runs a pool child took, to mark begun (see transitions.mark_begun); appended on
        # the loop, written by the finisher with the log lines.
        self._begun: list[tuple[int, int]] = []
        executors.on_begin = self._on_begin

    def _enough(self) -> int:
        """Half the slots: how many runs make a claim or a write of finishes go at once,
        unpaced (a drain's batches go at once; a worker of one slot writes each finish at
        once), and what a limited queue's claim gathers free slots for."""
        return max(1, self.concurrency // 2)

    def _free_slots(self) -> int:
        """Slots to claim into; none while a full batch of finishes waits to be written, or
        while a suspect runs (it runs alone: see run_claim)."""
        if len(self._finishes) >= self.concurrency or self._suspects_in_flight:
            return 0
        return self.concurrency - len(self._in_flight) - self._claiming

    def _reserve_slots(self) -> int:
        """Reserve every free slot for a claim about to be made; how many (maybe 0)."""
        with self._slots:
            free = max(0, self._free_slots())
            self._claiming += free
            return free

    def _unreserve_slots(self, count: int) -> None:
        with self._slots:
            self._claiming -= count

    def _running(self, run_id: int, attempt: int) -> InFlight | None:
        item = self._in_flight.get(run_id)
        return item if item is not None and item.job.attempt == attempt else None

    def _start(self, job: ClaimedRun) -> None:
        """Start executing a claimed run (the executor part)."""
        raise NotImplementedError

    def _on_begin(self, attempt: tuple[int, int]) -> None:
        """A pool child took a process run (the executor part)."""
        raise NotImplementedError


async def wait_for(event: asyncio.Event, seconds: float | None) -> None:
    """Until `event` is set or `seconds` pass (None: no limit). For the waits of every run
    and every idle spell: `asyncio.wait_for` starts a task per call."""
    if event.is_set():
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
