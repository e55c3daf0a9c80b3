"""A circuit breaker held by real worker processes and a real reaper: a dependency that
fails every call opens its breaker within its window, no run ends failed because of it
while it is open, and once the dependency recovers the backlog drains with no burst larger
than the trial runs, then at the queue's rate."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from app.catalog import job_definitions
from app.catalog.job_fields import JobSpec
from app.runs import breakers, queues
from app.runs.run_inserts import NewRun
from tests.helpers.processes import query, services, status_counts
from tests.helpers.waits import wait_until
from tests.helpers.workers import submit

QUEUE = "payments"
PROBES = 2
RATE = 20  # starts a second, once the breaker closes
RUNS = 60


def _breaker(db_url: str) -> str:
    return str(query(db_url, "SELECT state FROM dependencies")[0]["state"])


def _changed_at(db_url: str, action: str) -> datetime:
    rows = query(db_url, "SELECT max(at) AS at FROM audit_log WHERE action = %s", action)
    return rows[0]["at"]  # type: ignore[no-any-return]


def test_a_failing_dependency_opens_its_breaker_and_the_backlog_drains_after_it_recovers(
    db_url: str, tmp_path: Path
) -> None:
    down = tmp_path / "payments-api-is-down"
    down.touch()
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        spec = JobSpec.model_construct(name="charge", handler="call_dependency", queue=QUEUE,
                                       max_retries=3, dependencies=["payments-api"])  # fmt: skip
        job_definitions.create(conn, spec, actor="test")
        job_id = job_definitions.get(conn, "charge")["id"]
        breakers.set_settings(conn, "payments-api", actor="test", min_calls=5, window_seconds=10,
                              cool_off_seconds=2, probes=PROBES)  # fmt: skip
        queues.set_limits(conn, QUEUE, actor="test", rate_limit=RATE, rate_period_seconds=1)
    runs = [NewRun("call_dependency", {"down_file": str(down)}, job_id=job_id, queue=QUEUE,
                   max_retries=3)] * RUNS  # fmt: skip
    submit(db_url, *runs)
    with services(db_url, tmp_path) as start:
        reaper = start("reaper")
        workers = [start("worker", "--queues", f"{QUEUE}=4") for _ in range(2)]
        wait_until(lambda: _breaker(db_url) == "open", "the breaker to open", 20, workers[0])
        opened = _changed_at(db_url, "dependency.open")
        # while it stays down, the breaker cycles open -> trial -> open; nothing fails
        wait_until(lambda: query(db_url, "SELECT count(*) AS n FROM audit_log"
                                 " WHERE action = 'dependency.half_open'")[0]["n"] >= 2,
                   "two rounds of trial runs", 30, reaper)  # fmt: skip
        assert status_counts(db_url).get("failed", 0) == 0
        down.unlink()  # it recovers
        wait_until(lambda: status_counts(db_url).get("completed", 0) == RUNS,
                   "every run to complete", 60, workers[0])  # fmt: skip
        for service in (*workers, reaper):
            assert service.stop() == 0
    assert status_counts(db_url) == {"completed": RUNS}
    first_failures = query(
        db_url, "SELECT min(finished_at) AS at FROM job_run_attempts WHERE outcome = 'failed'"
    )[0]["at"]
    assert (opened - first_failures).total_seconds() < 10  # within its window
    # While it was open (between its openings and its trial runs), nothing started but trials.
    half_opened = _changed_at(db_url, "dependency.half_open")
    closed = _changed_at(db_url, "dependency.closed")
    starts = [r["started_at"] for r in query(
        db_url, "SELECT started_at FROM job_run_attempts WHERE started_at > %s ORDER BY 1",
        half_opened)]  # fmt: skip
    trials = [t for t in starts if t < closed]
    assert 1 <= len(trials) <= PROBES, trials
    after = [t for t in starts if t >= closed]
    assert len(after) >= RUNS - PROBES - 5
    for i in range(len(after) - 4):  # at the queue's rate: five starts span at least 0.15 s
        assert (after[i + 4] - after[i]).total_seconds() >= 0.15, "a burst after closing"
