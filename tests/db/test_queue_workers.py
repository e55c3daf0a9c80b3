"""Real worker processes serving named queues: each queue's runs start only on the workers
that serve it, within its own concurrency, and a paused queue starts nothing anywhere until
it is resumed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.runs import queues
from app.runs.run_inserts import NewRun
from tests.helpers.processes import query, services
from tests.helpers.waits import wait_until
from tests.helpers.workers import status_of, submit


def _overlap(db_url: str, queue: str) -> int:
    """The most runs of `queue` whose handlers ran at the same moment (a `span` handler's
    own times: a finish is recorded a moment after its handler ends, when the slot is
    already taken again)."""
    rows = [
        r["result"] for r in query(db_url, "SELECT result FROM job_runs WHERE queue = %s", queue)
    ]
    edges = sorted([(r["began"], 1) for r in rows] + [(r["ended"], -1) for r in rows])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_a_worker_serves_each_queue_with_its_own_concurrency_and_pauses_hold(
    db_url: str, tmp_path: Path
) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        queues.pause(conn, "held", actor="test", note="not yet")
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--queues", "default=4,reports=1,held=2")
        worker.wait_for_log("worker started: queue held")
        reports = submit(db_url, *[NewRun("span", {"seconds": 0.2}, queue="reports")] * 4)
        plain = submit(db_url, *[NewRun("span", {"seconds": 0.2})] * 8)
        held = submit(db_url, *[NewRun("noop", queue="held")] * 3)
        elsewhere = submit(db_url, NewRun("noop", queue="nobody-serves-this"))

        def done(ids: list[int]) -> bool:
            return all(status_of(db_url, i) == "completed" for i in ids)

        wait_until(lambda: done(reports + plain), "the served queues to drain", 60, worker)
        assert _overlap(db_url, "reports") == 1  # reports=1: one at a time
        assert 1 < _overlap(db_url, "default") <= 4
        assert {status_of(db_url, i) for i in held + elsewhere} == {"pending"}

        with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
            queues.resume(conn, "held", actor="test")
        wait_until(lambda: done(held), "the resumed queue to drain", 30, worker)
        assert status_of(db_url, elsewhere[0]) == "pending"
        assert worker.stop() == 0
    served: dict[str, Any] = {
        r["queue"]: r["n"]
        for r in query(db_url, "SELECT queue, count(*) AS n FROM job_runs GROUP BY queue")
    }
    assert served == {"reports": 4, "default": 8, "held": 3, "nobody-serves-this": 1}
