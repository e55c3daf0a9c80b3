"""`sundial_workers_wanted` on /metrics, read from a real database: runs ended with their
run times, runs due, and live workers registered as a worker registers itself."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from app.core.sql import query
from app.handlers.jobs import Outcome
from app.observability import metrics
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]


def wanted(conn: Conn, **kwargs: Any) -> dict[str, float]:
    text = metrics.read_fleet(conn, 60.0, default_slots=10, **kwargs).decode()
    return {
        s.labels["queue"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "sundial_workers_wanted"
    }


def register(conn: Conn, worker: str, queue: str, concurrency: int, in_flight: int) -> None:
    stats = {"queue": queue, "in_flight": in_flight}
    conn.execute(
        query("workers", "worker_register"),
        {"id": worker, "host": "h", "pid": 1, "concurrency": concurrency,
         "handlers": json.dumps(["noop"]), "handler_args": "{}", "stats": json.dumps(stats),
         "now": None},
    )  # fmt: skip


def test_the_hint_sizes_each_queue_by_its_starts_run_times_and_backlog(conn: Conn) -> None:
    # "reports": 30 runs of 4 s ended in the last minute: half a start a second, 2 busy
    # slots; its one live worker has 2 slots, so at 70 % busy it wants 2 workers.
    ids = [submission.submit(conn, NewRun("noop", queue="reports")).id for _ in range(30)]
    now = db_now(conn)
    claimed = transitions.claim(conn, "w-reports", 30, 60, queue="reports", now=now)
    assert sorted(c.run_id for c in claimed) == sorted(ids)
    ended = [transitions.Finish(c.run_id, c.attempt, Outcome.completed()) for c in claimed]
    transitions.finish_many(conn, "w-reports", ended, now=now + timedelta(seconds=4))
    register(conn, "w-reports", "reports", concurrency=2, in_flight=0)
    # "default": 20 due runs and no worker: nothing to size them by, so one worker.
    for _ in range(20):
        submission.submit(conn, NewRun("noop"))
    # "idle": a live worker and no work: none wanted.
    register(conn, "w-idle", "idle", concurrency=10, in_flight=0)

    assert wanted(conn) == {"reports": 2.0, "default": 1.0, "idle": 0.0}
