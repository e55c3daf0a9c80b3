"""A real worker captures each run's log records and output, in every execution model,
capped per attempt, and stores them in batches while the run is still going."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.run_logs import MAX_BYTES_PER_ATTEMPT, TRUNCATED
from tests.helpers.processes import query, services
from tests.helpers.waits import wait_until
from tests.helpers.workers import submit, wait_status

MODELS = ["async", "thread", "process", "subprocess"]


def lines_of(db_url: str, run_id: int) -> list[tuple[int, str, str]]:
    rows = query(
        db_url, "SELECT attempt, stream, line FROM run_logs WHERE run_id = %s ORDER BY seq", run_id
    )
    return [(r["attempt"], r["stream"], r["line"]) for r in rows]


@pytest.mark.parametrize("model", MODELS)
def test_logs_and_output_are_captured_and_capped_in_every_model(
    db_url: str, tmp_path: Path, model: str
) -> None:
    handler = "chatty_async" if model == "async" else "chatty"
    small, flooded = submit(
        db_url,
        NewRun(handler, {"lines": 2}, execution_model=model),
        NewRun(handler, {"lines": 1, "flood": 200_000}, execution_model=model),
    )
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "2")
        for run_id in (small, flooded):
            wait_status(db_url, run_id, "completed", service=worker)
        worker.stop()
    assert set(lines_of(db_url, small)) == {
        (1, "log", f"INFO tests.chatty: working on line {i} of run {small}") for i in (0, 1)
    } | {(1, "stdout", "printed 0"), (1, "stdout", "printed 1")} | {
        (1, "stderr", "complained 0"), (1, "stderr", "complained 1"),
    }  # fmt: skip
    flood = lines_of(db_url, flooded)
    assert flood[-1] == (1, flood[-1][1], TRUNCATED)
    stored = sum(len(line.encode()) + 1 for _, _, line in flood[:-1])
    assert MAX_BYTES_PER_ATTEMPT - 200 < stored <= MAX_BYTES_PER_ATTEMPT


@pytest.mark.parametrize("model", ["thread", "process", "subprocess"])
def test_lines_are_stored_while_the_run_is_still_running(
    db_url: str, tmp_path: Path, model: str
) -> None:
    """A job child sends its lines while it runs: they do not wait for its reply."""
    go = tmp_path / "go"
    (run_id,) = submit(db_url, NewRun("chatty", {"wait_file": str(go)}, execution_model=model))
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: lines_of(db_url, run_id), "the first line stored", 30, worker)
        assert query(db_url, "SELECT status FROM job_runs WHERE id = %s", run_id) == [
            {"status": "running"}
        ]
        assert lines_of(db_url, run_id) == [
            (1, "log", "INFO tests.chatty: started, waiting for the go-ahead")
        ]
        go.touch()
        wait_status(db_url, run_id, "completed", service=worker)
        worker.stop()
    assert len(lines_of(db_url, run_id)) == 1 + 3 * 3


def test_a_line_written_a_character_at_a_time_costs_no_more_than_its_characters(
    db_url: str, tmp_path: Path
) -> None:
    """300,000 one-character writes on one line: each used to copy the line so far, which
    took most of a minute and held the log lock that every other run's output waits for."""
    dribbled = submit(
        db_url,
        *(
            NewRun("dribble", {"chars": 300_000}, execution_model=model, timeout_seconds=10)
            for model in ("thread", "subprocess")
        ),
    )
    (echo,) = submit(db_url, NewRun("echo"))
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "3")
        for run_id in (*dribbled, echo):
            wait_status(db_url, run_id, "completed", "failed", "timed_out", service=worker)
        worker.stop()
    for run_id in dribbled:
        assert query(db_url, "SELECT status, result FROM job_runs WHERE id = %s", run_id) == [
            {"status": "completed", "result": 300_000}
        ]
        assert lines_of(db_url, run_id) == [(1, "stdout", TRUNCATED)]


def test_bytes_written_to_stdout_s_buffer_are_captured_in_every_model(
    db_url: str, tmp_path: Path
) -> None:
    ids = submit(db_url, *(NewRun("binary_output", execution_model=m) for m in MODELS))
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "4")
        rows = [
            wait_status(db_url, run_id, "completed", "failed", service=worker) for run_id in ids
        ]
        worker.stop()
    for model, run_id, row in zip(MODELS, ids, rows, strict=True):
        assert (row["status"], row["result"]) == ("completed", "written"), (model, row)
        assert lines_of(db_url, run_id) == [(1, "stdout", "café \ufffd\ufffd")], model


def test_a_run_moved_to_history_takes_its_log_lines(conn: Any) -> None:
    from datetime import timedelta

    from app.handlers.jobs import Outcome
    from app.runs import history, run_logs
    from app.runs.transitions import Finish
    from tests.helpers.waits import db_now

    old, kept = (submission.submit(conn, NewRun("noop")).id for _ in range(2))
    done = [
        Finish(j.run_id, j.attempt, Outcome.completed())
        for j in transitions.claim(conn, "w", 10, 30)
    ]
    assert len(transitions.finish_many(conn, "w", done)) == 2
    lines = [run_logs.LogLine(r, 1, 0, 0.0, "log", "hello") for r in (old, kept)]
    run_logs.append(conn, lines)
    run_logs.append(conn, lines)  # a batch sent twice is stored once
    conn.execute(
        "UPDATE job_runs SET finished_at = finished_at - interval '30 days' WHERE id = %s", (old,)
    )
    day_ago = db_now(conn) - timedelta(days=1)
    moved = history.move(conn, history.Cutoffs(day_ago, day_ago, day_ago))
    assert moved.runs == 1
    rows = conn.execute("SELECT run_id FROM run_logs ORDER BY run_id").fetchall()
    assert [r["run_id"] for r in rows] == [kept]
    rows = conn.execute("SELECT run_id FROM run_log_history").fetchall()
    assert [r["run_id"] for r in rows] == [old]
