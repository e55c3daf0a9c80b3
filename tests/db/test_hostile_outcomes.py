"""Outcomes the database cannot store as they are, handlers that raise what no handler
should, stale heartbeat reports: a real worker process keeps going and every run ends
with its own outcome."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.core.config import Settings
from app.executors import Executors
from app.handlers import default_registry
from app.handlers.gate import set_shell_enabled
from app.handlers.jobs import ClaimedRun, Outcome, OutcomeStatus
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from app.services.worker import Worker
from app.services.worker_state import InFlight
from tests.helpers import fixtures_handlers
from tests.helpers.handler_modules import BOTH_HANDLER_MODULES
from tests.helpers.processes import query, run_row, services
from tests.helpers.workers import MODELS, attempt_outcomes, submit, wait_status

Conn = psycopg.Connection[Any]
REPLACED = "\ufffd"


def hostile(kind: str, model: str) -> NewRun:
    return NewRun("fixture_hostile", {"kind": kind}, execution_model=model, max_retries=0)


def test_a_worker_stores_or_fails_every_hostile_outcome_and_keeps_working(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    set_shell_enabled(conn, True, actor="test")
    kinds = ["nul_result", "surrogate_result", "nul_error", "surrogate_error"]
    kinds += ["system_exit", "keyboard_interrupt", "cancelled_by_itself", "huge_int"]
    cases = [(kind, model) for model in MODELS for kind in kinds]
    ids = submit(db_url, *(hostile(kind, model) for kind, model in cases))
    shell_ids = submit(
        db_url,
        NewRun("shell", {"command": r"printf 'a\000b'"}, max_retries=0),
        NewRun("shell", {"command": r"printf 'x\000y' >&2; exit 1"}, max_retries=0),
    )
    echo_ids = submit(db_url, *(NewRun("echo", {"i": i}) for i in range(20)))
    with services(db_url, tmp_path) as start:
        worker = start(
            "worker",
            "--concurrency",
            "16",
            SUNDIAL_HANDLERS=BOTH_HANDLER_MODULES,
        )
        rows = {
            run_id: wait_status(db_url, run_id, "completed", "failed", service=worker)
            for run_id in ids + shell_ids + echo_ids
        }
        assert worker.proc.poll() is None, worker.log()
        assert worker.stop() == 0

    by_case = {case: rows[run_id] for case, run_id in zip(cases, ids, strict=True)}
    for model in MODELS:
        assert by_case["nul_result", model]["result"] == f"a{REPLACED}b"
        assert by_case["surrogate_result", model]["result"] == {
            f"k{REPLACED}{REPLACED}": [f"a{REPLACED}b", REPLACED],
            "n": 1,
        }
        assert by_case["nul_error", model]["last_error"] == f"RuntimeError: x{REPLACED}y"
        assert by_case["surrogate_error", model]["last_error"] == f"RuntimeError: x{REPLACED}y"
        assert by_case["system_exit", model]["last_error"] == "SystemExit: 3"
        assert by_case["keyboard_interrupt", model]["last_error"] == "KeyboardInterrupt: "
        assert by_case["cancelled_by_itself", model]["last_error"].startswith("CancelledError")
        assert "cannot be stored as JSON" in by_case["huge_int", model]["last_error"]
        for kind in kinds[2:]:
            row = by_case[kind, model]
            assert row["status"] == "failed", (kind, model, row)
            assert row["attempt"] == 1, (kind, model)  # ran once: nothing re-executed
            assert "lease expired" not in row["last_error"]
    shell_ok, shell_failed = (rows[i] for i in shell_ids)
    assert shell_ok["result"]["stdout"] == f"a{REPLACED}b"
    assert shell_failed["last_error"] == f"CommandFailed: command exited with code 1: x{REPLACED}y"
    assert all(rows[i]["status"] == "completed" for i in echo_ids)
    assert [r["attempt"] for r in query(db_url, "SELECT attempt FROM job_runs")] == [1] * len(rows)


def test_system_exit_from_a_task_a_handler_started_ends_that_attempt_not_the_worker(
    db_url: str, tmp_path: Path
) -> None:
    awaited, left_running = submit(
        db_url,
        NewRun("fixture_task_raises", {"awaited": True}, max_retries=0),
        NewRun("fixture_task_raises", {"awaited": False}, max_retries=0),
    )
    echo_ids = submit(db_url, *(NewRun("echo", {"i": i}) for i in range(10)))
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "4", SUNDIAL_HANDLERS=BOTH_HANDLER_MODULES)
        failed = wait_status(db_url, awaited, "failed", "completed", service=worker)
        returned = wait_status(db_url, left_running, "completed", "failed", service=worker)
        for run_id in echo_ids:
            wait_status(db_url, run_id, "completed", service=worker)
        assert worker.proc.poll() is None, worker.log()
        assert worker.stop() == 0
    assert (failed["status"], failed["last_error"]) == ("failed", "SystemExit: 5")
    assert (returned["status"], returned["result"]) == ("completed", "returned")
    assert "a job raised KeyboardInterrupt out of the event loop" in worker.log()


def test_a_child_s_result_too_deep_for_the_worker_to_read_fails_without_retries(
    db_url: str, tmp_path: Path
) -> None:
    deep = submit(
        db_url,
        *(
            NewRun("fixture_deep_result", {"depth": 3_000}, execution_model=model, max_retries=2)
            for model in ("process", "subprocess")
        ),
    )
    (echo,) = submit(db_url, NewRun("echo"))
    with services(db_url, tmp_path) as start:
        worker = start("worker", SUNDIAL_HANDLERS=BOTH_HANDLER_MODULES)
        rows = [wait_status(db_url, run_id, "failed", service=worker) for run_id in deep]
        wait_status(db_url, echo, "completed", service=worker)
        assert worker.stop() == 0
    for row in rows:
        assert row["attempt"] == 1  # the same result would be unreadable on every attempt
        assert row["last_error"].startswith("the result cannot be stored as JSON: Recursion")


BINARY_PAGES = {"/image": (200, b"\x89PNG\x00\x00\xff\xfe"), "/broken": (500, b"fell\x00over")}


class BinaryPages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body = BINARY_PAGES[self.path]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def binary_server() -> Iterator[str]:
    """A local HTTP server on 127.0.0.1 answering with NUL bytes; yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BinaryPages)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_http_bodies_with_nul_bytes_are_stored(
    db_url: str, tmp_path: Path, binary_server: str
) -> None:
    image, broken = submit(
        db_url,
        NewRun("http", {"url": f"{binary_server}/image"}, max_retries=0),
        NewRun("http", {"url": f"{binary_server}/broken"}, max_retries=0),
    )
    with services(db_url, tmp_path) as start:
        worker = start("worker", SUNDIAL_HTTP_ALLOW_NETWORKS="127.0.0.1/32")
        stored = wait_status(db_url, image, "completed", service=worker)
        failed = wait_status(db_url, broken, "failed", service=worker)
        assert worker.proc.poll() is None
    assert stored["result"] == {"status": 200, "body": f"\ufffdPNG{REPLACED * 2}\ufffd\ufffd"}
    assert failed["last_error"].endswith(f"answered 500: fell{REPLACED}over")


# ---- one refused outcome in a finish batch ------------------------------------------------


def in_process_worker(db_url: str) -> Worker:
    executors = Executors(default_registry, thread_workers=1, process_workers=0)
    return Worker(
        Settings.from_env({}), db_url, concurrency=4, executors=executors, handler_names=[]
    )


def claim_all(conn: Conn, worker: Worker, count: int) -> list[ClaimedRun]:
    for _ in range(count):
        submission.submit(conn, NewRun("noop"))
    return transitions.claim(conn, worker.id, count, 30)


def test_an_outcome_the_database_refuses_fails_its_run_alone(db_url: str, conn: Conn) -> None:
    # Written as they are (not through `storable`), as a future bug might let them through.
    worker = in_process_worker(db_url)
    good, nul, surrogate, deep, failure = claim_all(conn, worker, 5)
    batch = [
        Finish(good.run_id, 1, Outcome.completed({"ok": True})),
        Finish(nul.run_id, 1, Outcome.completed({"body": "a\x00b"})),
        Finish(surrogate.run_id, 1, Outcome(OutcomeStatus.FAILED, error="x\ud800")),
        Finish(deep.run_id, 1, Outcome.completed(fixtures_handlers.HOSTILE["deeply_nested"]())),
        Finish(failure.run_id, 1, Outcome(OutcomeStatus.FAILED, error="plain", retryable=False)),
    ]
    won = worker._record(conn, batch)

    assert {f.run_id for f in won} == {f.run_id for f in batch}
    assert run_row(db_url, good.run_id)["result"] == {"ok": True}
    assert run_row(db_url, failure.run_id)["last_error"] == "plain"
    for refused in (nul, surrogate, deep):
        row = run_row(db_url, refused.run_id)
        assert row["status"] == "failed"  # not retried: the same outcome would be refused
        assert row["last_error"].startswith("the attempt ended ")
        assert "but its outcome could not be stored: " in row["last_error"]
        assert attempt_outcomes(db_url, refused.run_id) == ["failed"]


# ---- heartbeat reports name attempts ----------------------------------------------------


def test_a_stale_lost_report_neither_warns_nor_stops_a_newer_attempt(
    db_url: str, conn: Conn, caplog: pytest.LogCaptureFixture
) -> None:
    worker = in_process_worker(db_url)
    (first,) = claim_all(conn, worker, 1)
    # The heartbeat read its list of held attempts; then attempt 1 finished (to a retry)
    # and this worker claimed attempt 2 of the same run.
    held = [(first.run_id, first.attempt)]
    transitions.finish_many(
        conn, worker.id, [Finish(first.run_id, 1, Outcome(OutcomeStatus.FAILED))]
    )
    conn.execute("UPDATE job_runs SET run_at = now() WHERE id = %s", (first.run_id,))
    (second,) = transitions.claim(conn, worker.id, 1, 30)
    assert second.attempt == 2
    item = InFlight(second)
    worker._in_flight[second.run_id] = item

    with caplog.at_level(logging.INFO):
        report = transitions.heartbeat(conn, worker.id, held, 30)
        worker._on_heartbeat(report)

    assert report.lost == {(first.run_id, 1)}  # attempt 1 no longer holds the run: true
    assert not item.lost and worker.stats.lost == 0  # but attempt 2 is not touched
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    renewed = transitions.heartbeat(conn, worker.id, [(second.run_id, 2)], 30)
    assert renewed.renewed == {(second.run_id, 2)} and renewed.lost == set()


def test_a_lost_report_of_the_running_attempt_stops_it(db_url: str, conn: Conn) -> None:
    worker = in_process_worker(db_url)
    (job,) = claim_all(conn, worker, 1)
    item = InFlight(job)
    worker._in_flight[job.run_id] = item
    conn.execute("UPDATE job_runs SET lease_owner = 'someone else' WHERE id = %s", (job.run_id,))

    worker._on_heartbeat(transitions.heartbeat(conn, worker.id, [(job.run_id, job.attempt)], 30))

    assert item.lost and worker.stats.lost == 1


# ---- a full disk --------------------------------------------------------------------------


def test_a_full_disk_is_named_and_the_finish_is_written_once_space_returns(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    conn.execute(
        "CREATE FUNCTION full_disk() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION "
        "'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; "
        "END $$ LANGUAGE plpgsql"
    )
    conn.execute(
        "CREATE TRIGGER full_disk BEFORE UPDATE ON job_runs FOR EACH ROW "
        "WHEN (NEW.status = 'completed') EXECUTE FUNCTION full_disk()"
    )
    (run_id,) = submit(db_url, NewRun("echo", {"disk": "full"}))
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        worker.wait_for_log("worker finish: database disk full (SQLSTATE 53100)")
        assert run_row(db_url, run_id)["status"] == "running"
        conn.execute("DROP TRIGGER full_disk ON job_runs")
        row = wait_status(db_url, run_id, "completed", service=worker)
        assert worker.stop() == 0
    assert row["result"]["args"] == {"disk": "full"}
    assert "database unavailable" not in worker.log()
