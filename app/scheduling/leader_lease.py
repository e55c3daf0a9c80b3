"""Leader lease: which of many processes acts for a singleton role (the trigger).

A row in `leader_leases` names the holder and a `term` until `lease_until`. A candidate
takes a free or expired lease at term + 1; the leader renews only its own row with its own
term, and steps down on any doubt (a renewal that matches nothing, a database error). A
dead leader is replaced once its lease runs out: within one lease period plus a tick.

The lease makes one trigger do the work; it is not what makes fires exactly-once (the
schedule row locks and the unique (schedule, fire_time) keys do that), so a leader that
does not yet know it was replaced can only repeat work that then changes nothing.

    lease = LeaderLease("trigger", holder="host:123", seconds=15)
    if lease.hold(conn):   # renew, or try to acquire; False: someone else leads
        ...
    lease.resign(conn)
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import datetime
from typing import Any

import psycopg

from app.core.db import Conn
from app.core.sql import query

log = logging.getLogger(__name__)


def new_holder_id() -> str:
    """host:pid:random, unique per process start."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LeaderLease:
    def __init__(self, name: str, holder: str, seconds: float) -> None:
        self.name = name
        self.holder = holder
        self.seconds = seconds
        self.term: int | None = None  # the term we lead in; None when not leading

    @property
    def leading(self) -> bool:
        return self.term is not None

    def hold(self, conn: Conn, now: datetime | None = None) -> bool:
        """Renew the lease if we lead, else try to take it. True: act as leader now."""
        try:
            if self.term is not None:
                if self._execute(conn, "lease_renew", now) is not None:
                    return True
                log.warning("lost the %s lease; stepping down", self.name, extra=self._extra())
                self.term = None
            row = self._execute(conn, "lease_acquire", now)
        except psycopg.Error:
            self.term = None  # in doubt: not leading until a renewal or acquisition succeeds
            raise
        if row is None:
            return False
        self.term = int(row["term"])
        log.info("became %s leader", self.name, extra=self._extra())
        return True

    def still_held(self, conn: Conn, now: datetime | None = None) -> bool:
        """Inside a transaction: whether our lease is still valid at its now. A check that
        fails steps down at once, whichever connection made it, so the tick's own next
        `hold` does not have to be the one that notices."""
        if self.term is None:
            return False
        if self._execute(conn, "lease_check", now) is not None:
            return True
        log.warning("lost the %s lease; stepping down", self.name, extra=self._extra())
        self.term = None
        return False

    def resign(self, conn: Conn, now: datetime | None = None) -> None:
        """Give the lease up so a standby takes over at once."""
        if self.term is None:
            return
        self._execute(conn, "lease_resign", now)
        log.info("resigned the %s lease", self.name, extra=self._extra())
        self.term = None

    def _execute(self, conn: Conn, statement: str, now: datetime | None) -> dict[str, Any] | None:
        params = {
            "name": self.name,
            "holder": self.holder,
            "term": self.term,
            "seconds": self.seconds,
            "now": now,
        }
        return conn.execute(query("leases", statement), params).fetchone()

    def _extra(self) -> dict[str, Any]:
        return {"term": self.term, "worker": self.holder}
