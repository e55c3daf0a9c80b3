"""Nothing is lost when workers are killed over and over, or PostgreSQL restarts mid-run."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.core import migrate
from app.runs import submission
from app.runs.run_inserts import NewRun
from tests.helpers.processes import (
    pg_ctl,
    private_postgres,
    query,
    services,
    status_counts,
    wait_until,
)

RUNS = 1000


def submit_sleeps(db_url: str, seconds: float, max_retries: int = 3) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        submission.submit_many(
            conn,
            [NewRun("sleep", {"seconds": seconds}, max_retries=max_retries) for _ in range(RUNS)],
        )


def test_nothing_is_lost_while_workers_are_killed_repeatedly(db_url: str, tmp_path: Path) -> None:
    submit_sleeps(db_url, 0.2, max_retries=20)
    rand = random.Random(7)
    kills = 0
    with services(db_url, tmp_path) as start:
        start("reaper")
        workers = [start("worker", "--concurrency", "20") for _ in range(2)]
        while (done := completed(db_url)) < RUNS:
            # Kill a worker once it has started and the fleet has completed 20-80 more
            # runs since the last kill: each kill lands mid-work on a fast or a slow machine.
            victim = workers.pop(rand.randrange(len(workers)))
            victim.wait_for_log("worker started", timeout=60)
            target = min(done + rand.randint(20, 80), RUNS)
            wait_until(lambda n=target: completed(db_url) >= n, f"{target} completed", 120, victim)
            if completed(db_url) >= RUNS:
                break
            victim.kill()
            kills += 1
            workers.append(start("worker", "--concurrency", "20"))
    counts = status_counts(db_url)
    assert counts == {"completed": RUNS}, counts
    lost = query(db_url, "SELECT count(*) AS n FROM job_run_attempts WHERE outcome = 'lost'")
    assert kills >= 3
    assert lost[0]["n"] > 0, "the kills never hit a run in flight"
    # every re-run attempt that completed is the run's final attempt
    (row,) = query(
        db_url,
        "SELECT count(*) AS n FROM job_runs r JOIN job_run_attempts a "
        "ON a.run_id = r.id AND a.outcome = 'completed' WHERE a.attempt <> r.attempt",
    )
    assert row["n"] == 0


def completed(db_url: str) -> int:
    return status_counts(db_url).get("completed", 0)


@pytest.fixture
def own_server() -> Iterator[Any]:
    """A private embedded PostgreSQL this test may restart without disturbing others."""
    with private_postgres() as server:
        yield server


def test_postgres_restart_during_a_run_of_1000_jobs(own_server: Any, tmp_path: Path) -> None:
    with psycopg.connect(own_server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE chaos")
    db_url = own_server.get_uri("chaos")
    migrate.upgrade(db_url)
    submit_sleeps(db_url, 0.05)
    with services(db_url, tmp_path) as start:
        start("reaper")
        worker = start("worker", "--concurrency", "10")
        wait_until(
            lambda: status_counts(db_url).get("completed", 0) >= 100, "100 completed", 60, worker
        )
        pg_ctl(own_server, "restart")
        wait_until(
            lambda: status_counts(db_url).get("completed", 0) == RUNS, "all completed", 180, worker
        )
        assert "reconnected to the database" in worker.log()
    assert status_counts(db_url) == {"completed": RUNS}
