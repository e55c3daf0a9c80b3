"""Run transitions, worker liveness and a new trigger leader reach the event hub through
its one LISTEN connection."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from app.core.sql import query
from app.handlers.jobs import Outcome
from app.runs import run_inserts, submission, transitions
from app.scheduling.leader_lease import LeaderLease
from app.web.events import EventHub, Subscription, Topic
from tests.helpers.live import listener_count
from tests.helpers.waits import wait_until, wait_until_async


def _run(db_url: str, work: Callable[[Any], Any]) -> Any:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return work(conn)


async def _after(db_url: str, sub: Subscription, work: Callable[[Any], Any]) -> set[Topic]:
    """The topics the hub reports after `work` ran (on another connection, committed)."""
    await asyncio.to_thread(_run, db_url, work)
    return await asyncio.wait_for(sub.next(), 5)


def test_transitions_notify_the_hub_by_topic(db_url: str) -> None:
    async def scenario() -> None:
        hub = EventHub(db_url)
        await hub.start()
        try:
            sub = hub.subscribe({Topic.RUNS, Topic.WORKERS, Topic.TRIGGER})
            # listening: its refresh of every topic was published and handed out; drain it
            await wait_until_async(lambda: hub.generation >= 1 and hub.flushes >= 1, "LISTEN")
            assert await asyncio.to_thread(listener_count, db_url) == 1
            await sub.next()

            def submit(c: Any) -> int:
                return submission.submit(c, run_inserts.NewRun("noop")).id

            run_id = await asyncio.to_thread(_run, db_url, submit)
            assert Topic.RUNS in await asyncio.wait_for(sub.next(), 5)
            assert Topic.RUNS in await _after(
                db_url, sub, lambda c: transitions.claim(c, "w", 1, 30)
            )
            done = [transitions.Finish(run_id, 1, Outcome.completed())]
            assert Topic.RUNS in await _after(
                db_url, sub, lambda c: transitions.finish_many(c, "w", done)
            )
            register = {"id": "w", "host": "h", "pid": 1, "concurrency": 1, "handlers": Jsonb([]),
                        "handler_args": Jsonb({}), "stats": Jsonb({}), "now": None}  # fmt: skip
            workers = await _after(
                db_url, sub, lambda c: c.execute(query("workers", "worker_register"), register)
            )
            assert Topic.WORKERS in workers
            leader = LeaderLease("trigger", "t-1", 10)
            assert Topic.TRIGGER in await _after(db_url, sub, leader.hold)
            assert hub.notifications >= 5
        finally:
            await hub.stop()

    asyncio.run(scenario())
    wait_until(lambda: listener_count(db_url) == 0, "the hub's LISTEN connection to close", 10)
