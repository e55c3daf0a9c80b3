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

from app.core.db import Conn
from app.services.reconnecting import DB_ERRORS, Reconnecting

log = logging.getLogger(__name__)

Step = Callable[[Conn], object]


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
    conn = Reconnecting(url, name, stop.is_set, wait=stop.wait)
    log.info("%s started", name)
    try:
        while not stop.is_set():
            try:
                conn.call(step)
            except DB_ERRORS:
                break  # raised only once stopping, during an outage
            stop.wait(interval)
    finally:
        conn.close()
        log.info("%s stopped", name)
