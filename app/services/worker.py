"""The worker process: registers itself, and (issue 3) claims and executes runs."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import uuid

from app.backoff import Backoff
from app.config import Settings
from app.db import DatabaseUnavailable, check_database, connect_async

log = logging.getLogger(__name__)


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


async def _main(settings: Settings, url: str, concurrency: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker_id = new_worker_id()
    backoff = Backoff()
    log.info("worker started", extra={"worker": worker_id})
    while not stop.is_set():
        try:
            async with await connect_async(url, autocommit=True) as conn:
                await conn.execute(
                    "INSERT INTO workers (id, host, pid, concurrency) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET last_seen = now()",
                    (worker_id, socket.gethostname(), os.getpid(), concurrency),
                )
                backoff.reset()
                while not stop.is_set():
                    await conn.execute(
                        "UPDATE workers SET last_seen = now() WHERE id = %s", (worker_id,)
                    )
                    try:
                        await asyncio.wait_for(stop.wait(), settings.lease_seconds / 3)
                    except TimeoutError:
                        pass
                await conn.execute(
                    "UPDATE workers SET stopped_at = now() WHERE id = %s", (worker_id,)
                )
        except (DatabaseUnavailable, OSError) as exc:
            delay = backoff.next_delay()
            log.warning("database unavailable (%s); retrying in %.1fs", exc, delay)
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except TimeoutError:
                pass
    log.info("worker stopped", extra={"worker": worker_id})


def run_worker(settings: Settings, url: str, concurrency: int | None = None) -> int:
    check_database(url)
    asyncio.run(_main(settings, url, concurrency or settings.worker_concurrency))
    return 0
