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

# SQLSTATE class 53: the server is up but short of a resource; reconnecting will not help.
_INSUFFICIENT_RESOURCES = {
    "53100": "database disk full",
    "53200": "database out of memory",
    "53300": "too many connections to the database",
    "53400": "a database configuration limit was exceeded",
}


def describe_db_error(exc: BaseException) -> str:
    """What went wrong, in words: `database disk full (SQLSTATE 53100)`, ... or
    `database unavailable` for a lost or refused connection."""
    sqlstate = _sqlstate(exc)
    if sqlstate is None or not sqlstate.startswith("53"):
        return "database unavailable"
    name = _INSUFFICIENT_RESOURCES.get(sqlstate, "database short of resources")
    return f"{name} (SQLSTATE {sqlstate})"


# A refused connection carries no SQLSTATE, only the server's message.
_CONNECT_MESSAGES = {
    "No space left on device": "53100",
    "out of memory": "53200",
    "too many connections": "53300",
    "too many clients": "53300",
    "connection slots are reserved": "53300",
}


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of `exc` or of the error it wraps (`DatabaseUnavailable` on connect)."""
    current: BaseException | None = exc
    while current is not None:
        sqlstate = getattr(current, "sqlstate", None)
        if sqlstate:
            return str(sqlstate)
        current = current.__cause__
    message = str(exc)
    return next((code for text, code in _CONNECT_MESSAGES.items() if text in message), None)


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
        # The last error came from a statement on a working connection (a full disk): a
        # new connection proves nothing, so only a statement that succeeds resets the backoff.
        self._statements_failing = False

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        while True:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = connect(self.url, autocommit=True)
                    if self._backoff.failures:
                        log.info("%s reconnected to the database", self.name)
                    if not self._statements_failing:
                        self._backoff.reset()
                result = fn(self._conn, *args)
                self._statements_failing = False
                self._backoff.reset()
                return result
            except DB_ERRORS as exc:
                self._statements_failing = self._conn is not None and not self._conn.broken
                self.close()
                if self.stopped():
                    raise
                delay = self._backoff.next_delay()
                log.warning(
                    "%s: %s (%s); retrying in %.1fs",
                    self.name,
                    describe_db_error(exc),
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
