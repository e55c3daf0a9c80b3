"""The worker as deployed: real `sundial worker` and `sundial reaper` processes, real
PostgreSQL, real crashes (SIGKILL), pauses (SIGSTOP) and cancellations."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from app.core import limits
from app.runs.run_inserts import NewRun
from tests.helpers.processes import query, run_row, services, status_counts, wait_until
from tests.helpers.workers import attempt_outcomes, status_of, submit, wait_status


def test_worker_executes_runs_and_records_results(db_url: str, tmp_path: Path) -> None:
    ids = submit(db_url, *(NewRun("echo", {"i": i}) for i in range(50)))
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "8")
        wait_until(lambda: status_counts(db_url).get("completed") == 50, "50 completed", 30, worker)
        assert worker.stop() == 0  # a clean stop records the final stats
    row = run_row(db_url, ids[7])
    assert row["result"] == {"args": {"i": 7}, "run_id": ids[7], "attempt": 1}
    assert row["attempt"] == 1
    (registered,) = query(db_url, "SELECT handlers, stats, stopped_at FROM workers")
    builtins_and_ours = {"noop", "sleep", "fail", "crash", "http", "shell", "echo"}
    assert builtins_and_ours <= set(registered["handlers"])
    # live load for the dashboard: in flight, loop lag and pool saturation
    for key in ("in_flight", "completed", "loop_lag_ms", "threads_busy", "leaked_thread_slots"):
        assert key in registered["stats"], key
    assert registered["stats"]["completed"] == 50
    assert registered["stopped_at"] is not None


def test_segfaulting_process_job_fails_its_attempt_and_the_pool_recovers(
    db_url: str, tmp_path: Path
) -> None:
    (crash_id,) = submit(
        db_url, NewRun("crash", {"signal": "SEGV"}, execution_model="process", max_retries=0)
    )
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        row = wait_status(db_url, crash_id, "failed", service=worker)
        assert "SIGSEGV" in row["last_error"]
        after = submit(
            db_url,
            *(NewRun("busy", {"seconds": 0.01}, execution_model="process") for _ in range(4)),
        )
        for run_id in after:
            wait_status(db_url, run_id, "completed", service=worker)


def test_kill_9_mid_job_is_recovered_by_reaper_and_another_worker(
    db_url: str, tmp_path: Path
) -> None:
    (run_id,) = submit(db_url, NewRun("sleep", {"seconds": 2}))
    with services(db_url, tmp_path) as start:
        first = start("worker")
        wait_status(db_url, run_id, "running", service=first)
        first.kill()
        start("reaper")
        second = start("worker")
        row = wait_status(db_url, run_id, "completed", timeout=30, service=second)
    assert row["attempt"] == 2
    assert attempt_outcomes(db_url, run_id) == ["lost", "completed"]


def test_job_that_kills_its_worker_every_time_ends_in_dead_letters(
    db_url: str, tmp_path: Path
) -> None:
    """It kills its worker once; then it runs in a process of its own, kills only that, and
    is quarantined after its crash limit, without spending its retries."""
    (run_id,) = submit(db_url, NewRun("crash", max_retries=2))
    with services(db_url, tmp_path) as start:
        start("reaper")
        for _ in range(30):
            if status_of(db_url, run_id) == "failed":
                break
            worker = start("worker")
            wait_until(
                lambda w=worker: w.proc.poll() is not None or status_of(db_url, run_id) == "failed",
                "worker death",
                20,
            )
            worker.kill()
        row = wait_status(db_url, run_id, "failed", timeout=20)
    assert row["quarantined"] and row["attempt"] == 1 + limits.DEFAULT_MAX_CRASHES
    assert attempt_outcomes(db_url, run_id) == ["lost"] + ["failed"] * limits.DEFAULT_MAX_CRASHES


def test_sigstopped_worker_cannot_overwrite_the_newer_attempt(db_url: str, tmp_path: Path) -> None:
    (run_id,) = submit(db_url, NewRun("sleep", {"seconds": 1}))
    with services(db_url, tmp_path) as start:
        paused = start("worker")
        wait_status(db_url, run_id, "running", service=paused)
        paused.signal(signal.SIGSTOP)
        start("reaper")
        other = start("worker")
        row = wait_status(db_url, run_id, "completed", timeout=30, service=other)
        assert row["attempt"] == 2
        paused.signal(signal.SIGCONT)
        # its heartbeat finds the lease lost, or its finish finds the run taken
        wait_until(
            lambda: "lease lost" in paused.log() or "changed 0 rows" in paused.log(),
            "the paused worker to notice it lost the run",
            20,
            paused,
        )
        assert paused.stop() == 0  # once it has exited, it can write nothing more
    row = run_row(db_url, run_id)
    assert (row["status"], row["attempt"]) == ("completed", 2)
    assert attempt_outcomes(db_url, run_id) == ["lost", "completed"]


@pytest.mark.parametrize(("handler", "model"), [("busy", "thread"), ("block_loop", "async")])
def test_heartbeats_flow_while_a_job_hogs_the_gil_or_the_loop(
    db_url: str, tmp_path: Path, handler: str, model: str
) -> None:
    # 4 s of CPU with a 1.5 s lease: without heartbeats the reaper would take it over
    (run_id,) = submit(db_url, NewRun(handler, {"seconds": 4}, execution_model=model))
    with services(db_url, tmp_path) as start:
        start("reaper")
        worker = start("worker")
        row = wait_status(db_url, run_id, "completed", timeout=30, service=worker)
    assert row["attempt"] == 1
    assert attempt_outcomes(db_url, run_id) == ["completed"]


def test_sigterm_finishes_short_jobs_and_hands_long_ones_back(db_url: str, tmp_path: Path) -> None:
    short, long = submit(
        db_url,
        NewRun("sleep", {"seconds": 0.5}, priority=5),
        NewRun("sleep", {"seconds": 60}, max_retries=0),
    )
    with services(db_url, tmp_path) as start:
        worker = start("worker", SUNDIAL_SHUTDOWN_GRACE_SECONDS="1.5")
        wait_until(
            lambda: status_of(db_url, long) == "running" and status_of(db_url, short) != "pending",
            "both claimed",
            20,
            worker,
        )
        worker.signal(signal.SIGTERM)
        assert worker.proc.wait(20) == 0
        assert "handed 1 unfinished runs back" in worker.log()
    assert status_of(db_url, short) == "completed"
    row = run_row(db_url, long)
    assert (row["status"], row["attempt"], row["retry_base"]) == ("pending", 1, 1)
    assert attempt_outcomes(db_url, long) == ["released"]


def test_sigterm_is_honoured_when_every_slot_is_busy(db_url: str, tmp_path: Path) -> None:
    (run_id,) = submit(db_url, NewRun("sleep", {"seconds": 60}))
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "1", SUNDIAL_SHUTDOWN_GRACE_SECONDS="1")
        wait_status(db_url, run_id, "running", service=worker)
        worker.signal(signal.SIGTERM)
        assert worker.proc.wait(30) == 0
        assert "handed 1 unfinished runs back" in worker.log()  # it did not wait out the job
    assert status_of(db_url, run_id) == "pending"
    assert attempt_outcomes(db_url, run_id) == ["released"]


def test_a_failed_attempt_is_one_json_line_in_the_worker_log(db_url: str, tmp_path: Path) -> None:
    (run_id,) = submit(db_url, NewRun("fail", {"message": "the bank said no"}, max_retries=0))
    with services(db_url, tmp_path) as start:
        worker = start("worker", SUNDIAL_LOG_FORMAT="json")
        wait_until(
            lambda: run_row(db_url, run_id)["status"] == "failed", "the run failed", 30, worker
        )
        worker.stop()
    lines = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
    (failed,) = [line for line in lines if line.get("run_id") == run_id and line.get("outcome")]
    assert failed["outcome"] == "failed" and failed["handler"] == "fail"
    assert "the bank said no" in failed["error"] and failed["attempt"] == 1
    assert all(line.startswith("{") for line in worker.log().splitlines() if line.strip())
