"""A worker's heartbeat and its registration: an OS thread with its own connection renews
every held lease in one statement, refreshes the worker's row in `workers`, and has the
event loop stop the attempts the database reports lost or cancelled. It runs apart from the
event loop so that a job blocking the loop or holding the GIL cannot starve it.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime
from typing import Any

from psycopg.types.json import Json, Jsonb

from app.core.db import Conn
from app.core.sql import query
from app.runs import transitions
from app.services.reconnecting import DB_ERRORS
from app.services.worker_state import WorkerState

# The worker's own logger: its lines read the same whichever part wrote them.
log = logging.getLogger("app.services.worker")


class Heartbeat(WorkerState):
    """The heartbeat part of a worker (`app.services.worker.Worker`)."""

    def _heartbeat_loop(self) -> None:
        interval = self.lease_seconds / 3
        try:
            while not self._threads_stop.wait(interval):
                try:
                    self.heartbeat_once()
                except DB_ERRORS:
                    return
        finally:
            self._beat.close()

    def heartbeat_once(self) -> transitions.HeartbeatResult:
        """Renew the lease of every run held here (running or waiting to be recorded),
        refresh this worker's stats, and have the event loop stop the attempts the
        database reports lost or cancelled. Called from the heartbeat thread."""
        held = [(i.job.run_id, i.job.attempt) for i in self._in_flight.copy().values()]
        held += [(f.run_id, f.attempt) for f in list(self._finishes)]
        result = self._beat.call(transitions.heartbeat, self.id, held, self.lease_seconds)
        self._beat.call(self._refresh_registration)
        if result.lost or result.cancel_requested:
            self._loop.call_soon_threadsafe(self._on_heartbeat, result)
        return result

    def _on_heartbeat(self, result: transitions.HeartbeatResult) -> None:
        """Stop the attempts the heartbeat found lost or cancelled. Only attempts still
        running here count: one this worker finished since, or an older attempt of a run
        now running a newer one here, is none of this report's business."""
        for run_id, attempt in result.lost:
            item = self._running(run_id, attempt)
            if item is not None and not item.lost:
                item.lost = True
                self.stats.lost += 1
                transitions.count_lease_lost()
                log.warning(
                    "lease lost; stopping the job",
                    extra={"run_id": run_id, "attempt": attempt, "worker": self.id},
                )
                self.executors.cancel(run_id, attempt)
        for run_id, attempt in result.cancel_requested:
            if self._running(run_id, attempt) is not None:
                log.info(
                    "cancel requested; stopping the job",
                    extra={"run_id": run_id, "attempt": attempt},
                )
                self.executors.cancel(run_id, attempt)

    def _register(self, conn: Conn, now: datetime | None = None) -> None:
        conn.execute(
            query("workers", "worker_register"),
            {
                "id": self.id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "concurrency": self.concurrency,
                "handlers": Jsonb(self.handler_names),
                "handler_args": Json(self.handler_args),  # json keeps the declared order
                "stats": Jsonb(self._stats_doc()),
                "now": now,
            },
        )

    def _refresh_registration(self, conn: Conn, now: datetime | None = None) -> None:
        params = {"id": self.id, "stats": Jsonb(self._stats_doc()), "now": now}
        conn.execute(query("workers", "worker_refresh"), params)

    def _unregister(self, conn: Conn, now: datetime | None = None) -> None:
        params = {"id": self.id, "stats": Jsonb(self._stats_doc()), "now": now}
        conn.execute(query("workers", "worker_unregister"), params)

    def _stats_doc(self) -> dict[str, Any]:
        return {
            "in_flight": len(self._in_flight),
            "queue": self.queue,  # the one it claims from
            "claimed": self.stats.claimed,
            "completed": self.stats.completed,
            "failed": self.stats.failed,
            "lost": self.stats.lost,
            "loop_lag_ms": round(self.stats.loop_lag_seconds * 1000, 2),
            **self.executors.stats(),
        }
