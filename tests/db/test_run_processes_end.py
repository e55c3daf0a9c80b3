"""Everything a run starts ends with it, detached processes included: when the run ends,
times out or is cancelled, and when its worker is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from app.handlers.gate import set_shell_enabled
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from tests.helpers.processes import run_row, services, wait_until

MODELS = ["async", "thread", "subprocess", "process"]


def detaching_command(marker: str, then: str) -> str:
    """Starts three processes that leave the command's process group, each way a command
    can: `setsid`, `nohup` in a background subshell, and a double fork; then `then`."""
    sleeper = f"sleep {marker}"
    return (
        f"setsid sh -c '{sleeper}' </dev/null >/dev/null 2>&1 & "
        f"(nohup sh -c '{sleeper}' </dev/null >/dev/null 2>&1 &) ; "
        f"(sh -c '(setsid sh -c \"{sleeper}\" &) &' </dev/null >/dev/null 2>&1) ; "
        f"sleep 0.3; {then}"
    )


def unique_sleep() -> str:
    """A number of seconds to sleep (600 and a bit) that no other process has in its
    command line."""
    return f"600.{uuid.uuid4().int % 10**12:012d}"


def processes_named(marker: str) -> list[int]:
    """The live processes whose command line carries `marker` (zombies aside)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def submit_shell(db_url: str, command: str, model: str, **settings: int) -> int:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        set_shell_enabled(conn, True, actor="test")
        run = NewRun(
            "shell", {"command": command}, execution_model=model, max_retries=0, **settings
        )
        return submission.submit(conn, run).id


def wait_for_detached(marker: str) -> None:
    wait_until(lambda: len(processes_named(marker)) >= 3, "the detached processes", 30)


@pytest.mark.parametrize("model", MODELS)
def test_a_runs_detached_processes_end_when_it_completes(
    db_url: str, tmp_path: Path, model: str
) -> None:
    marker = unique_sleep()
    run_id = submit_shell(db_url, detaching_command(marker, "sleep 2; exit 0"), model)
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_for_detached(marker)
        wait_until(lambda: run_row(db_url, run_id)["status"] == "completed", "done", 60, worker)
        wait_until(lambda: not processes_named(marker), "the detached processes gone", 10)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("ending", ["timed_out", "cancelled"])
def test_a_runs_detached_processes_end_when_it_is_stopped(
    db_url: str, tmp_path: Path, model: str, ending: str
) -> None:
    marker = unique_sleep()
    limit = {"timeout_seconds": 3} if ending == "timed_out" else {}
    run_id = submit_shell(db_url, detaching_command(marker, "sleep 600"), model, **limit)
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_for_detached(marker)
        if ending == "cancelled":
            with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
                transitions.cancel(conn, run_id)
        wait_until(lambda: run_row(db_url, run_id)["status"] == ending, ending, 60, worker)
        wait_until(lambda: not processes_named(marker), "the detached processes gone", 10)


@pytest.mark.parametrize("model", MODELS)
def test_a_runs_detached_processes_end_when_its_worker_is_killed(
    db_url: str, tmp_path: Path, model: str
) -> None:
    marker = unique_sleep()
    submit_shell(db_url, detaching_command(marker, "sleep 600"), model)
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_for_detached(marker)
        worker.signal(signal.SIGKILL)
        # within one lease (1.5 s here); 10 s bounds a hang on a busy machine
        wait_until(lambda: not processes_named(marker), "the detached processes gone", 10)
