"""One database connection that reopens itself after errors, with backoff.

Every service uses it: the worker for its claim, finish and heartbeat connections, the
trigger and reaper for their loop. Leases are time-based, so riding out a short outage
(a PostgreSQL restart, a failover) loses no work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from app.backoff import Backoff
from app.db import DatabaseUnavailable, connect

log = logging.getLogger(__name__)

T = TypeVar("T")
Conn = psycopg.Connection[dict[str, Any]]

DB_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, DatabaseUnavailable)


class Reconnecting:
    """One psycopg connection used from one thread at a time, reopened after errors.

    `call(fn, *args)` runs `fn(conn, *args)`; on a connection error it reconnects with
    backoff and tries again until it succeeds or `stopped()` says to give up (then the
    error is raised). `wait(seconds)` sleeps between tries: pass a stop event's `wait`
    so a stop cuts the sleep short.
    """

    def __init__(
        self,
        url: str,
        name: str,
        stopped: Callable[[], bool],
        wait: Callable[[float], object] = time.sleep,
    ) -> None:
        self.url = url
        self.name = name
        self.stopped = stopped
        self.wait = wait
        self._conn: Conn | None = None
        self._backoff = Backoff()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        while True:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = connect(self.url, autocommit=True)
                    if self._backoff.failures:
                        log.info("%s reconnected to the database", self.name)
                    self._backoff.reset()
                return fn(self._conn, *args)
            except DB_ERRORS as exc:
                self.close()
                if self.stopped():
                    raise
                delay = self._backoff.next_delay()
                log.warning(
                    "%s: database unavailable (%s); retrying in %.1fs",
                    self.name,
                    " ".join(str(exc).split())[:200],
                    delay,
                )
                self.wait(delay)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
