"""A `shell` command reports progress and snoozes through $JOB_CONTROL_FILE, run by a
real worker against a real PostgreSQL: the progress shows on the run while it runs, and a
snooze puts the run back without spending an attempt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.handlers.gate import set_shell_enabled
from app.runs.run_inserts import NewRun
from tests.helpers.processes import run_row, services, wait_until
from tests.helpers.workers import attempt_outcomes, submit, wait_status

Conn = psycopg.Connection[Any]


@pytest.fixture(autouse=True)
def shell_on(conn: Conn) -> None:
    set_shell_enabled(conn, True, actor="test")


def test_a_command_reports_progress_while_it_runs(db_url: str, tmp_path: Path) -> None:
    go_on = tmp_path / "go-on"
    script = (
        'echo "progress 50 half of the files" >> "$JOB_CONTROL_FILE"; '
        f'while [ ! -e "{go_on}" ]; do sleep 0.05; done; '
        'echo "progress 100 all files" >> "$JOB_CONTROL_FILE"; echo done'
    )
    (run_id,) = submit(db_url, NewRun("shell", {"command": script}))
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: run_row(db_url, run_id)["progress"] == 50, "progress 50", 30, worker)
        row = run_row(db_url, run_id)
        assert (row["status"], row["progress_message"]) == ("running", "half of the files")
        go_on.touch()
        row = wait_status(db_url, run_id, "completed", service=worker)
    assert (row["progress"], row["progress_message"]) == (100, "all files")
    assert row["result"]["stdout"] == "done\n"


def test_a_command_snoozes_and_comes_back_with_its_attempt_unspent(
    db_url: str, tmp_path: Path
) -> None:
    first = tmp_path / "tried-once"
    script = (
        f'if [ ! -e "{first}" ]; then touch "{first}"; '
        'echo "snooze 1 the partner\'s file is not there yet" >> "$JOB_CONTROL_FILE"; '
        "exit 3; fi; echo second"
    )
    (run_id,) = submit(db_url, NewRun("shell", {"command": script}, max_retries=0))
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        row = wait_status(db_url, run_id, "completed", service=worker)
    assert row["result"]["stdout"] == "second\n"
    assert row["snooze_count"] == 1 and row["attempt"] - row["retry_base"] == 1
    assert attempt_outcomes(db_url, run_id) == ["snoozed", "completed"]
