"""The one way tests name an instant, read the database clock and wait for a condition."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import psutil
import psycopg
from psycopg.rows import tuple_row

if TYPE_CHECKING:
    from tests.helpers.processes import Service

POLL_SECONDS = 0.05


def utc(text: str) -> datetime:
    """`2026-03-29T01:00` as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def db_now(conn: psycopg.Connection[Any]) -> datetime:
    """The database's `now()`: the clock every statement compares against."""
    row = conn.cursor(row_factory=tuple_row).execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def wait_until(
    check: Callable[[], Any], what: str, timeout: float = 30, service: Service | None = None
) -> Any:
    """Poll `check` until it returns something true, and return that. `timeout` is only a
    bound on a hang, never part of what is tested; a `service` that exits fails the wait
    at once, with its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if service is not None and service.proc.poll() is not None:
            raise AssertionError(
                f"{service.name} exited while waiting for {what}:\n{service.log()}"
            )
        time.sleep(POLL_SECONDS)
    detail = f"\n{service.log()}" if service else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}{detail}")


def wait_until_blocked(
    conn: psycopg.Connection[Any], pid: int, *, or_done: threading.Thread | None = None
) -> None:
    """Until the session with backend `pid` waits for a lock that another transaction holds
    (a row it wants to change, say), or until `or_done` (the thread running that session's
    work, when the test allows it not to wait) has finished. Asks the lock manager: inside
    a transaction, `pg_stat_activity` would show the same first reading every time."""

    def blocked() -> bool:
        if or_done is not None and not or_done.is_alive():
            return True
        cursor = conn.cursor(row_factory=tuple_row)
        row = cursor.execute("SELECT cardinality(pg_blocking_pids(%s)) > 0", (pid,)).fetchone()
        return bool(row and row[0])

    wait_until(blocked, f"session {pid} to wait for a lock")


def gone(pid: int) -> bool:
    """No such process, or only a zombie waiting to be reaped by whoever inherited it."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until_gone(pid: int) -> None:
    wait_until(lambda: gone(pid), f"process {pid} gone")


async def wait_until_async(check: Callable[[], Any], what: str) -> Any:
    """`wait_until` for a test on an event loop: polls without blocking the loop."""
    timeout = 30
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(POLL_SECONDS)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
