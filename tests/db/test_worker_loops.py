"""The worker's loops one step at a time, in this process: `fetch_once` claims and starts
runs, `finish_once` records them, `heartbeat_once` renews leases and stops attempts the
database reports lost or cancelled, `listen_once` relays new-run notifications. Real
PostgreSQL and real executors; tests/db/test_worker.py keeps what needs a real process
(signals, crashes, kills)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import psutil
import psycopg
import pytest
from psycopg.rows import dict_row

from app.core.config import Settings
from app.runs import transitions
from app.runs.run_inserts import NewRun
from app.services.worker import CLAIM_PACE_SECONDS, Worker, build_worker
from app.services.worker_finisher import FINISH_WRITE_SECONDS
from tests.helpers.processes import run_row
from tests.helpers.waits import db_now, wait_until, wait_until_async
from tests.helpers.workers import MODELS, attempt_outcomes, submit

T = TypeVar("T")
SUBPROCESS_CHILD = "app.executors.child"  # the module a subprocess job runs
WORKER_ENV = {"SUNDIAL_HANDLERS": "tests.helpers.worker_handlers", "SUNDIAL_LEASE_SECONDS": "30"}


def with_worker(
    db_url: str, test: Callable[[Worker], Awaitable[T]], concurrency: int = 2, **env: str
) -> T:
    """Run `test` against a started worker (no loops running) on a fresh event loop."""
    settings = Settings.from_env({"DATABASE_URL": db_url, **WORKER_ENV, **env})
    worker = build_worker(settings, db_url, concurrency)

    async def main() -> T:
        await worker.start()
        try:
            return await test(worker)
        finally:
            await worker.close()

    return asyncio.run(main())


def connect(db_url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(db_url, autocommit=True, row_factory=dict_row)


def test_fetch_claims_up_to_the_free_slots_and_finish_records_the_results(db_url: str) -> None:
    ids = submit(db_url, *(NewRun("echo", {"i": i}) for i in range(3)))

    async def steps(worker: Worker) -> None:
        first = await worker.fetch_once()
        assert first is not None and len(first) == 2  # concurrency 2
        assert await worker.fetch_once() == []  # no free slot until the first two finish
        await worker.wait_executed()
        won = await worker.finish_once()
        assert sorted(f.run_id for f in won) == sorted(j.run_id for j in first)
        second = await worker.fetch_once()
        assert second is not None and len(second) == 1
        await worker.wait_executed()
        await worker.finish_once()
        assert (worker.stats.claimed, worker.stats.completed) == (3, 3)

    with_worker(db_url, steps)
    row = run_row(db_url, ids[1])
    assert (row["status"], row["attempt"]) == ("completed", 1)
    assert row["result"] == {"args": {"i": 1}, "run_id": ids[1], "attempt": 1}


def test_unknown_handler_fails_at_once_without_retries(db_url: str) -> None:
    (run_id,) = submit(db_url, NewRun("no_such_handler", max_retries=5))

    async def steps(worker: Worker) -> None:
        await worker.fetch_once()
        await worker.wait_executed()
        await worker.finish_once()

    with_worker(db_url, steps)
    row = run_row(db_url, run_id)
    assert (row["status"], row["attempt"]) == ("failed", 1)
    assert "no_such_handler" in row["last_error"]


def test_poison_job_dead_letters_after_max_retries_with_traceback(db_url: str) -> None:
    (run_id,) = submit(db_url, NewRun("fail", {"message": "always broken"}, max_retries=2))

    async def steps(worker: Worker) -> None:
        with connect(db_url) as conn:
            for _ in range(3):
                (job,) = await worker.fetch_once() or []
                await worker.wait_executed()
                await worker.finish_once()
                # skip the backoff wait: make the retry due now
                conn.execute("UPDATE job_runs SET run_at = now() WHERE id = %s", (job.run_id,))

    with_worker(db_url, steps)
    row = run_row(db_url, run_id)
    assert (row["status"], row["attempt"]) == ("failed", 3)
    assert "always broken" in row["last_error"]
    assert "Traceback" in row["traceback"]
    assert attempt_outcomes(db_url, run_id) == ["failed", "failed", "failed"]


def test_heartbeat_renews_the_lease_of_a_running_job(db_url: str) -> None:
    (run_id,) = submit(db_url, NewRun("sleep", {"seconds": 60}))

    async def steps(worker: Worker) -> None:
        await worker.fetch_once()
        with connect(db_url) as conn:  # a lease about to run out
            conn.execute("UPDATE job_runs SET lease_until = now() WHERE id = %s", (run_id,))
            result = await asyncio.to_thread(worker.heartbeat_once)
            assert result.renewed == {(run_id, 1)}
            assert not result.lost and not result.cancel_requested
            lease_left = run_row(db_url, run_id)["lease_until"] - db_now(conn)
        assert timedelta(0) < lease_left <= timedelta(seconds=30)  # renewed for 30 s

    with_worker(db_url, steps)


def test_heartbeat_stops_a_job_whose_lease_was_taken_and_drops_its_outcome(
    db_url: str,
) -> None:
    (run_id,) = submit(db_url, NewRun("sleep", {"seconds": 60}))

    async def steps(worker: Worker) -> None:
        await worker.fetch_once()
        with connect(db_url) as conn:  # the reaper, an hour later, gives the run a new attempt
            transitions.reap(conn, now=db_now(conn) + timedelta(hours=1))
            (job,) = transitions.claim(conn, "other", 1, 30)
        result = await asyncio.to_thread(worker.heartbeat_once)
        assert result.lost == {(run_id, 1)}
        await worker.wait_executed()  # the job was stopped: nothing left to wait 60 s for
        assert await worker.finish_once() == []
        assert worker.stats.lost == 1
        assert job.attempt == 2

    with_worker(db_url, steps)
    row = run_row(db_url, run_id)
    assert (row["status"], row["attempt"]) == ("running", 2)


def test_heartbeat_stops_a_cancelled_job_and_finish_records_the_cancel(db_url: str) -> None:
    (run_id,) = submit(db_url, NewRun("sleep", {"seconds": 60}, execution_model="thread"))

    async def steps(worker: Worker) -> None:
        await worker.fetch_once()
        with connect(db_url) as conn:
            assert transitions.cancel(conn, run_id) == "running"
        result = await asyncio.to_thread(worker.heartbeat_once)
        assert result.cancel_requested == {(run_id, 1)}
        await worker.wait_executed()
        await worker.finish_once()

    with_worker(db_url, steps)
    assert run_row(db_url, run_id)["status"] == "cancelled"
    assert attempt_outcomes(db_url, run_id) == ["cancelled"]


def test_listen_relays_a_new_run_notification(db_url: str) -> None:
    async def steps(worker: Worker) -> tuple[bool, bool]:
        with connect(db_url) as listening:
            worker.listen(listening)
            quiet = worker.listen_once(listening, timeout=0)
            submit(db_url, NewRun("echo"))
            heard = await asyncio.to_thread(worker.listen_once, listening, 30)
        return quiet, heard

    quiet, heard = with_worker(db_url, steps)
    assert (quiet, heard) == (False, True)


def test_an_idle_fetchers_notification_is_claimed_by_the_listener_up_to_the_free_slots(
    db_url: str,
) -> None:
    async def steps(worker: Worker) -> None:
        assert await worker.fetch_once() == []  # checks the claim connection, as a start does
        with connect(db_url) as listening:
            worker.listen(listening)
            await asyncio.sleep(0)  # the wake-up `listen` sends, which the fetcher's loop clears
            worker._wake.clear()
            idle = asyncio.create_task(worker._idle_wait())
            await asyncio.sleep(0.05)  # the fetcher waits for a notification
            ids = submit(db_url, *(NewRun("echo", {"i": i}) for i in range(3)))
            assert await asyncio.to_thread(worker.listen_once, listening, 30)
            await asyncio.wait_for(idle, 10)  # woken once the claimed runs were handed over
        rows = [run_row(db_url, i) for i in ids]
        assert [(r["status"], r["lease_owner"], r["attempt"]) for r in rows[:2]] == [
            ("running", worker.id, 1)
        ] * 2  # the listener's claim fills the 2 free slots, oldest first
        assert rows[2]["status"] == "pending"
        assert worker.stats.claimed == 2 and worker._claiming == 0  # started, nothing held
        await worker.wait_executed()
        await worker.finish_once()
        rest = await worker.fetch_once()  # the fetcher claims what did not fit
        assert rest is not None and [j.run_id for j in rest] == ids[2:]
        await worker.wait_executed()
        await worker.finish_once()
        assert (worker.stats.claimed, worker.stats.completed) == (3, 3)

    with_worker(db_url, steps)


def test_a_busy_fetchers_notification_only_wakes_it(db_url: str) -> None:
    async def steps(worker: Worker) -> None:
        assert await worker.fetch_once() == []
        with connect(db_url) as listening:
            worker.listen(listening)
            await asyncio.sleep(0)  # the wake-up `listen` sends
            worker._wake.clear()
            (run_id,) = submit(db_url, NewRun("echo"))
            assert await asyncio.to_thread(worker.listen_once, listening, 30)
            await asyncio.wait_for(worker._wake.wait(), 10)
        assert run_row(db_url, run_id)["status"] == "pending"  # left to the fetcher
        assert worker._in_flight == {} and worker._claiming == 0

    with_worker(db_url, steps)


@pytest.mark.parametrize("model", MODELS)
def test_timeout_stops_the_job_for_each_model(db_url: str, model: str) -> None:
    (run_id,) = submit(
        db_url,
        NewRun("sleep", {"seconds": 60}, timeout_seconds=1, max_retries=0, execution_model=model),
    )

    async def steps(worker: Worker) -> None:
        await worker.fetch_once()
        await worker.wait_executed()
        await worker.finish_once()
        (after,) = submit(db_url, NewRun("echo", {"after": model}))
        await worker.fetch_once()  # the slot the stopped job held is free again
        await worker.wait_executed()
        await worker.finish_once()
        assert run_row(db_url, after)["status"] == "completed"

    with_worker(db_url, steps)
    row = run_row(db_url, run_id)
    assert (row["status"], row["attempt"]) == ("timed_out", 1)
    assert row["finished_at"] - row["started_at"] < timedelta(seconds=60)  # stopped early
    assert attempt_outcomes(db_url, run_id) == ["timed_out"]


@pytest.mark.parametrize("model", MODELS)
def test_cancel_stops_a_running_job_for_each_model(db_url: str, model: str) -> None:
    (run_id,) = submit(db_url, NewRun("sleep", {"seconds": 60}, execution_model=model))

    async def steps(worker: Worker) -> None:
        await worker.fetch_once()
        if model == "subprocess":
            await asyncio.to_thread(wait_until, lambda: SUBPROCESS_CHILD in children(), "child")
        with connect(db_url) as conn:
            assert transitions.cancel(conn, run_id) == "running"
        await asyncio.to_thread(worker.heartbeat_once)
        await worker.wait_executed()
        await worker.finish_once()
        if model == "subprocess":
            await asyncio.to_thread(wait_until, lambda: SUBPROCESS_CHILD not in children(), "gone")

    with_worker(db_url, steps)
    row = run_row(db_url, run_id)
    assert row["status"] == "cancelled"
    assert row["finished_at"] - row["started_at"] < timedelta(seconds=60)  # stopped early
    assert attempt_outcomes(db_url, run_id) == ["cancelled"]


def children() -> str:
    """Command lines of this process's children: a subprocess job runs in one."""
    lines = []
    for child in psutil.Process(os.getpid()).children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it exited meanwhile
            lines.append(" ".join(child.cmdline()))
    return " ".join(lines)


# ---- pools that start when first needed ---------------------------------------------------

POOL_CHILD = "app.executors.pool_child"  # the module a process child runs


def test_the_process_children_start_with_the_first_process_run_and_run_it(db_url: str) -> None:
    ids = submit(db_url, NewRun("echo", {"i": 1}), NewRun("chatty", execution_model="process"))

    async def steps(worker: Worker) -> None:
        assert POOL_CHILD not in children()  # started: claim connection ready, no children
        claimed = await worker.fetch_once()
        assert claimed is not None and len(claimed) == 2
        await worker.wait_executed()
        await worker.finish_once()
        assert POOL_CHILD in children()
        assert worker.executors.stats()["processes_alive"] == worker.executors.process_workers

    with_worker(db_url, steps)
    assert [run_row(db_url, i)["status"] for i in ids] == ["completed", "completed"]
    assert attempt_outcomes(db_url, ids[1]) == ["completed"]


def test_a_worker_that_runs_no_process_job_never_starts_children_or_spare_threads(
    db_url: str,
) -> None:
    submit(db_url, *(NewRun("echo", {"i": i}) for i in range(6)))
    submit(db_url, NewRun("chatty", execution_model="thread"))

    async def steps(worker: Worker) -> None:
        while worker.stats.claimed < 7:
            await worker.fetch_once()
            await worker.wait_executed()
            await worker.finish_once()
        stats = worker.executors.stats()
        assert (stats["processes_alive"], stats["threads_alive"]) == (0, 1)  # one thread job
        assert stats["threads_total"] == 4  # the pool may grow to the concurrency
        assert worker.stats.completed == 7

    with_worker(db_url, steps, concurrency=4)
    assert POOL_CHILD not in children()


def test_a_stream_of_runs_is_claimed_and_recorded_in_paced_batches(db_url: str) -> None:
    # Behind a transaction pooler every claim and every write of finishes is planned
    # afresh: a worker fed one run at a time gathers them, claiming and writing at most
    # once per pace, instead of once per run. (Its connections here are direct; the pace
    # is the worker's own.)
    pooled = {"SUNDIAL_DATABASE_POOLER": "transaction", "SUNDIAL_DIRECT_DATABASE_URL": db_url}
    settings = Settings.from_env({"DATABASE_URL": db_url, **WORKER_ENV, **pooled})
    worker = build_worker(settings, db_url, 50)
    runs = 120

    async def main() -> float:
        stop = asyncio.Event()
        working = asyncio.create_task(worker.run(stop))
        began = time.monotonic()
        for i in range(runs):
            await asyncio.to_thread(submit, db_url, NewRun("echo", {"i": i}))
            await asyncio.sleep(0.004)
        await wait_until_async(lambda: worker.stats.completed == runs, "every run recorded")
        elapsed = time.monotonic() - began
        stop.set()
        await working
        return elapsed

    elapsed = asyncio.run(main())
    assert worker.stats.claimed == runs
    assert 1 <= worker.stats.claims <= elapsed / CLAIM_PACE_SECONDS + 2
    assert worker.stats.finish_writes <= elapsed / FINISH_WRITE_SECONDS + 2
