"""The loop shared by the trigger and the reaper: connect, `run_once`, wait, repeat.

Connection loss (a PostgreSQL restart, a failover) is logged and retried with backoff;
SIGTERM or SIGINT ends the loop after the step in progress.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import psycopg

from app.backoff import Backoff
from app.db import DatabaseUnavailable, connect

log = logging.getLogger(__name__)

Step = Callable[[psycopg.Connection[dict[str, Any]]], object]


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so a loop can finish its step and exit."""
    stop = threading.Event()

    def handle(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop


def run_periodic(name: str, url: str, interval: float, step: Step, stop: threading.Event) -> None:
    """Call `step(conn)` every `interval` seconds until `stop` is set."""
    backoff = Backoff()
    conn: psycopg.Connection[dict[str, Any]] | None = None
    log.info("%s started", name)
    try:
        while not stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = connect(url, autocommit=True)
                    if backoff.failures:
                        log.info("%s reconnected to the database", name)
                    backoff.reset()
                step(conn)
            except (DatabaseUnavailable, psycopg.OperationalError) as exc:
                delay = backoff.next_delay()
                log.warning(
                    "%s: database unavailable (%s); retrying in %.1fs",
                    name,
                    str(exc).strip().splitlines()[-1:],
                    delay,
                )
                if conn is not None:
                    conn.close()
                conn = None
                stop.wait(delay)
                continue
            stop.wait(interval)
    finally:
        if conn is not None:
            conn.close()
        log.info("%s stopped", name)
