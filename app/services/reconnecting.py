"""One database connection that reopens itself after errors, with backoff.

Every service uses it: the worker for its claim, finish, heartbeat and listener
connections, the trigger and reaper for their loop. Leases are time-based, so riding out a
short outage (a PostgreSQL restart, a failover) loses no work.

Reconnect attempts stay frequent during an outage (at most `RETRY_CAP_SECONDS` apart), so
a server that answers again is used again within about a second; the warnings about them
thin out instead (one per doubling interval, at most one a minute per connection).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from app.core.backoff import Backoff
from app.core.db import Conn, DatabaseUnavailable, connect

log = logging.getLogger(__name__)

T = TypeVar("T")

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


RETRY_BASE_SECONDS = 0.1
RETRY_CAP_SECONDS = 1.0  # a failed connect is cheap; a server back up is found at once
FIRST_WARNING_INTERVAL_SECONDS = 1.0
MAX_WARNING_INTERVAL_SECONDS = 60.0


class Reconnecting:
    """One psycopg connection used from one thread at a time, reopened after errors.

    `call(fn, *args)` runs `fn(conn, *args)`; on a connection error it reconnects with
    backoff and tries again until it succeeds or `stopped()` says to give up (then the
    error is raised). `wait(seconds)` sleeps between tries: pass a stop event's `wait`
    so a stop cuts the sleep short. `open()` and `check(fn)` try once and never wait, for
    start-up and for a worker asking whether it could record what it claims. Calls from
    different threads take turns. The connection's `application_name` is
    `sundial <name> <pid>`, so `pg_stat_activity` shows who holds each connection.
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
        self._backoff = Backoff(RETRY_BASE_SECONDS, RETRY_CAP_SECONDS)
        self._lock = threading.RLock()
        self._failing = False
        self._outage_started = 0.0
        self._next_warning = 0.0
        self._warning_interval = FIRST_WARNING_INTERVAL_SECONDS

    @property
    def failing(self) -> bool:
        """The last use of the connection failed and it has not worked since."""
        return self._failing

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        while True:
            with self._lock:
                try:
                    return self._use(fn, *args)
                except DB_ERRORS as exc:
                    if self.stopped():
                        raise
                    self._warn(exc)
                    delay = self._backoff.next_delay()
            self.wait(delay)

    def open(self) -> None:
        """Connect now unless connected; raises the error at once (no retry)."""
        with self._lock:
            self._use(lambda conn: None)

    def check(self, fn: Callable[[Conn], object]) -> bool:
        """Whether `fn(conn)` works now, reconnecting once if needed; never raises or
        waits: while another thread is using the connection, its last state answers."""
        if not self._lock.acquire(blocking=False):
            return not self._failing
        try:
            self._use(fn)
        except DB_ERRORS:
            return False
        finally:
            self._lock.release()
        return True

    def _use(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connect(
                    self.url, autocommit=True, application_name=f"sundial {self.name} {os.getpid()}"
                )
            result = fn(self._conn, *args)
        except DB_ERRORS:
            self.close()
            if not self._failing:
                self._failing = True
                self._outage_started = self._next_warning = time.monotonic()
            raise
        # Only a statement that worked ends an outage: a server out of disk or of
        # connection slots may accept a connection and still fail every statement.
        if self._failing:
            log.info(
                "%s reconnected to the database after %.1fs",
                self.name,
                time.monotonic() - self._outage_started,
            )
            self._failing = False
            self._warning_interval = FIRST_WARNING_INTERVAL_SECONDS
        self._backoff.reset()
        return result

    def _warn(self, exc: BaseException) -> None:
        """A warning per doubling interval of an outage, not one per attempt."""
        now = time.monotonic()
        if now < self._next_warning:
            return
        self._next_warning = now + self._warning_interval
        self._warning_interval = min(2 * self._warning_interval, MAX_WARNING_INTERVAL_SECONDS)
        log.warning(
            "%s: %s for %.0fs (%s); retrying every %.1fs at most",
            self.name,
            describe_db_error(exc),
            now - self._outage_started,
            " ".join(str(exc).split())[:200],
            RETRY_CAP_SECONDS,
        )

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None


# ---- waiting for the database at start --------------------------------------------------

START_RETRY_BASE_SECONDS = 0.5
START_RETRY_CAP_SECONDS = 5.0

# Refusals that waiting does not cure: the URL names a user, password or database the
# server does not have. The service says so once and exits (a configuration error).
_MISCONFIGURED = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
)


def misconfigured(exc: BaseException) -> bool:
    """Whether `exc` refuses this URL for good rather than for now."""
    return any(text in str(exc) for text in _MISCONFIGURED)


def wait_for_database(name: str, start: Callable[[], T], stop: threading.Event) -> T | None:
    """`start()` (a service's start-up check of its database), tried again with growing
    delays while the database cannot be reached or is short of resources (out of
    connection slots, disk full), with a log line per try: a trigger or reaper started
    before its database (a restart, a failover, a dyno that comes up first) starts working
    once the database answers instead of exiting. None if `stop` is set first; a
    misconfigured URL raises at once."""
    backoff = Backoff(START_RETRY_BASE_SECONDS, START_RETRY_CAP_SECONDS)
    began = time.monotonic()
    while True:
        try:
            return start()
        except DB_ERRORS as exc:
            if misconfigured(exc):
                raise
            delay = backoff.next_delay()
            log.warning(
                "%s waits for the database: %s for %.0fs (%s); trying again in %.1fs",
                name,
                describe_db_error(exc),
                time.monotonic() - began,
                " ".join(str(exc).split())[:200],
                delay,
            )
        if stop.wait(delay):
            return None
