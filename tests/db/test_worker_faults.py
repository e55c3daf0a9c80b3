"""Workers under faults, as deployed: real `sundial worker` processes on a private
PostgreSQL that runs short of connections, goes away and comes back, and workers killed
with SIGKILL while their job children run."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.core import migrate
from app.runs import submission
from app.runs.run_inserts import NewRun
from app.services.worker import WORKER_CONNECTIONS
from tests.helpers.processes import (
    pg_ctl,
    private_postgres,
    query,
    services,
    status_counts,
    wait_until,
)
from tests.helpers.waits import gone

MAX_CONNECTIONS = 12
# Back within this long after PostgreSQL answers again (reconnects are at most 1 s apart);
# before, a worker could wait out a 10 s backoff.
PROMPT_SECONDS = 5.0
# Long enough for the old reconnect backoff to reach its 10 s cap.
OUTAGE_SECONDS = 12.0


@pytest.fixture
def small_server() -> Iterator[Any]:
    with private_postgres(max_connections=str(MAX_CONNECTIONS)) as server:
        yield server


@pytest.fixture
def small_db(small_server: Any) -> str:
    with psycopg.connect(small_server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE faults")
    url: str = small_server.get_uri("faults")
    migrate.upgrade(url)
    return url


def connect(db_url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(db_url, autocommit=True, row_factory=dict_row)


def submit(db_url: str, *new_runs: NewRun) -> list[int]:
    with connect(db_url) as conn:
        return [s.id for s in submission.submit_many(conn, list(new_runs))]


def fill_connections(db_url: str, stack: ExitStack) -> list[psycopg.Connection[Any]]:
    """Take every connection slot the server has left; closed when `stack` closes."""
    taken = []
    while True:
        try:
            conn = psycopg.connect(db_url, autocommit=True, row_factory=dict_row)
        except psycopg.OperationalError as exc:
            assert "too many clients" in str(exc), exc
            return taken
        taken.append(stack.enter_context(conn))


def take_one_slot(db_url: str, stack: ExitStack) -> psycopg.Connection[Any]:
    """A connection, as soon as a slot frees up."""
    conn = wait_until(lambda: _try_connect(db_url), "a free connection slot", 20)
    stack.enter_context(conn)
    return conn  # type: ignore[no-any-return]


def _try_connect(db_url: str) -> psycopg.Connection[Any] | None:
    try:
        return psycopg.connect(db_url, autocommit=True, row_factory=dict_row)
    except psycopg.OperationalError:
        return None


def terminate(conn: psycopg.Connection[Any], application_name: str) -> int:
    rows = conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (application_name,),
    ).fetchall()
    return len(rows)


# ---- 14: too few connections ----------------------------------------------------------


def test_a_worker_refused_a_connection_at_start_up_exits_naming_it(
    small_db: str, tmp_path: Path
) -> None:
    with ExitStack() as stack, services(small_db, tmp_path) as start:
        fillers = fill_connections(small_db, stack)
        for conn in fillers[: WORKER_CONNECTIONS - 1]:  # room for three, not four
            conn.close()
        worker = start("worker")
        assert worker.proc.wait(60) == 1
        log = worker.log()
    assert "worker needs 4 database connections (claim, finish, heartbeat, listener)" in log
    assert "the server refused its listener connection" in log
    assert "too many clients" in log
    assert "Traceback" not in log


def test_a_worker_that_cannot_record_claims_leaves_runs_to_one_that_can(
    small_db: str, tmp_path: Path
) -> None:
    """Starved worker: its claim and finish connections are cut and the server is full.
    It must not claim runs it could not record; the healthy worker runs them all."""
    with ExitStack() as stack, services(small_db, tmp_path) as start:
        starved = start("worker", "--concurrency", "4")
        healthy = start("worker", "--concurrency", "2")
        for worker in (starved, healthy):
            worker.wait_for_log("worker started")
        fillers = fill_connections(small_db, stack)
        admin = fillers[0]
        for name in ("claim", "finish"):
            assert terminate(admin, f"sundial worker {name} {starved.pid}") == 1
        take_one_slot(small_db, stack)
        take_one_slot(small_db, stack)
        fillers[-1].close()  # one slot: the starved claim connection gets it, not finish
        starved.wait_for_log("claims paused")
        run_ids = submit_on(admin, *(NewRun("echo", {"i": i}) for i in range(10)))
        wait_until(
            lambda: all_completed(admin, run_ids), "the healthy worker ran them all", 60, healthy
        )
        attempts = admin.execute(
            "SELECT worker, attempt FROM job_run_attempts WHERE run_id = ANY(%s)", (run_ids,)
        ).fetchall()
        stack.close()  # the fillers go: the starved worker can record again
        starved.wait_for_log("claims resumed")
    assert len(attempts) == 10 and {a["attempt"] for a in attempts} == {1}
    assert not any(str(starved.pid) in (a["worker"] or "") for a in attempts)


def submit_on(conn: psycopg.Connection[Any], *new_runs: NewRun) -> list[int]:
    return [s.id for s in submission.submit_many(conn, list(new_runs))]


def all_completed(conn: psycopg.Connection[Any], run_ids: list[int]) -> bool:
    (row,) = conn.execute(
        "SELECT count(*) FILTER (WHERE status = 'completed') = %s AS done "
        "FROM job_runs WHERE id = ANY(%s)",
        (len(run_ids), run_ids),
    ).fetchall()
    return bool(row["done"])


# ---- 16: job children die with their worker -------------------------------------------


@pytest.mark.parametrize("model", ["process", "subprocess"])
def test_children_of_a_sigkilled_worker_die_with_it(
    db_url: str, tmp_path: Path, model: str
) -> None:
    pids = tmp_path / "pids"
    submit(
        db_url,
        NewRun("fixture_write_pids", {"path": str(pids), "seconds": 60}, execution_model=model),
    )
    with services(db_url, tmp_path) as start:
        worker = start(
            "worker",
            SUNDIAL_HANDLERS="tests.helpers.worker_handlers,tests.helpers.fixtures_handlers",
        )
        wait_until(
            lambda: pids.exists() and len(pids.read_text().split()) == 2,
            "the job's child and grandchild",
            60,
            worker,
        )
        child, grandchild = map(int, pids.read_text().split())
        assert not gone(child) and not gone(grandchild)
        worker.kill()
        wait_until(lambda: gone(child) and gone(grandchild), "the job's processes gone", 20)


# ---- 18: prompt reconnect ---------------------------------------------------------------


def test_claims_resume_promptly_after_a_long_outage(small_server: Any, tmp_path: Path) -> None:
    with psycopg.connect(small_server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE outage")
    db_url = small_server.get_uri("outage")
    migrate.upgrade(db_url)
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        worker.wait_for_log("worker started")
        pg_ctl(small_server, "stop")
        worker.wait_for_log("database unavailable")
        time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for a condition
        pg_ctl(small_server, "restart")
        back = time.monotonic()
        (run_id,) = submit(db_url, NewRun("echo"))
        wait_until(lambda: status_counts(db_url).get("completed") == 1, "run completed", 60, worker)
        assert time.monotonic() - back < PROMPT_SECONDS, worker.log()
    (row,) = query(db_url, "SELECT attempt FROM job_runs WHERE id = %s", run_id)
    assert row["attempt"] == 1


def test_a_last_attempt_that_completed_during_an_outage_is_recorded_after_the_reaper(
    small_server: Any, tmp_path: Path
) -> None:
    """The job ends while PostgreSQL is down for longer than the lease; the reaper declares
    the attempt dead first (a crash: the run is re-queued; the worker is paused meanwhile);
    the worker's late completion still wins, as no newer attempt exists."""
    with psycopg.connect(small_server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE late")
    db_url = small_server.get_uri("late")
    migrate.upgrade(db_url)
    (run_id,) = submit(db_url, NewRun("sleep", {"seconds": 1}, max_retries=0))
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: status_counts(db_url).get("running") == 1, "run claimed", 30, worker)
        pg_ctl(small_server, "stop")
        worker.wait_for_log("worker finish: database unavailable")  # the result waits
        worker.signal(signal.SIGSTOP)
        pg_ctl(small_server, "restart")
        reaper = start("reaper")
        wait_until(lambda: status_counts(db_url) == {"pending": 1}, "reaped", 30, reaper)
        worker.signal(signal.SIGCONT)
        wait_until(lambda: status_counts(db_url) == {"completed": 1}, "late", 30, worker)
        assert "completion recorded late" in worker.log()
    (row,) = query(db_url, "SELECT attempt, last_error FROM job_runs WHERE id = %s", run_id)
    assert row == {"attempt": 1, "last_error": None}


# ---- 15: a process job's timeout is its own run time ----------------------------------


def test_a_process_run_behind_a_busy_pool_is_not_timed_out_by_its_wait(
    db_url: str, tmp_path: Path
) -> None:
    """Every pool child is busy (one per CPU) when the last run is claimed: it waits longer
    than its timeout for a child, then runs well within it."""
    children = os.cpu_count() or 1
    busy = [
        NewRun("sleep", {"seconds": 2}, priority=9, timeout_seconds=30, execution_model="process")
        for _ in range(children)
    ]
    waiting = NewRun(
        "sleep",
        {"seconds": 0.2},
        priority=0,
        timeout_seconds=1,
        max_retries=0,
        execution_model="process",
    )
    ids = submit(db_url, *busy, waiting)
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", str(children + 1))
        wait_until(
            lambda: sum(status_counts(db_url).get(s, 0) for s in ("pending", "running")) == 0,
            "every run ended",
            60,
            worker,
        )
    (row,) = query(db_url, "SELECT * FROM job_runs WHERE id = %s", ids[-1])
    assert (row["status"], row["attempt"]) == ("completed", 1), row["last_error"]
    assert row["finished_at"] - row["started_at"] > timedelta(seconds=1)  # it did wait
