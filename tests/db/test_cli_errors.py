"""The `sundial` command answers a mistake with one sentence and an exit code, starts and
writes nothing, and prints what people and handlers wrote without letting it drive the
terminal. Real processes, real database."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.dags import workflow_shapes
from app.runs import run_inserts, submission
from app.scheduling import schedule_spec
from tests.helpers.commands import REPO, free_port, run_sundial, start_dev, sundial_cmd, sundial_env
from tests.helpers.processes import query, run_row, wait_until
from tests.helpers.workflows import ETL, define_jobs, write

ESC = "\x1b[2J\x1b[H"  # clear the screen, cursor home


def assert_one_sentence(result: subprocess.CompletedProcess[str], command: str, code: int) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.startswith(f"sundial {command}: error:"), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["worker"], {"SUNDIAL_LOG_LEVEL": "verbose"}, "SUNDIAL_LOG_LEVEL must be one of"),
        (["worker"], {"SUNDIAL_HANDLERS": "no_such_module"}, "'no_such_module'"),
        (["dev"], {"SUNDIAL_HANDLERS": "no_such_module"}, "'no_such_module'"),
        (["worker"], {"SUNDIAL_LEASE_SECONDS": "nan"}, "SUNDIAL_LEASE_SECONDS must be between"),
        (["worker"], {"SUNDIAL_LEASE_SECONDS": "inf"}, "SUNDIAL_LEASE_SECONDS must be between"),
        (["reaper"], {"SUNDIAL_KEEP_RUNS_DAYS": "1e10"}, "SUNDIAL_KEEP_RUNS_DAYS must be"),
        (["trigger"], {"SUNDIAL_TRIGGER_INTERVAL_SECONDS": "1e300"}, "between 0.01 and 86400"),
        (["web"], {"PORT": "99999"}, "PORT must be between 1 and 65535"),
        (["submit", "noop"], {"SUNDIAL_POLL_SECONDS": "nan"}, "SUNDIAL_POLL_SECONDS must be"),
    ],
)
def test_bad_settings_are_one_sentence_and_start_nothing(
    db_url: str, args: list[str], env: dict[str, str], message: str
) -> None:
    result = run_sundial(db_url, *args, **env)
    assert_one_sentence(result, args[0], 2)
    assert message in result.stderr
    assert query(db_url, "SELECT count(*) AS n FROM workers") == [{"n": 0}]
    assert query(db_url, "SELECT count(*) AS n FROM job_runs") == [{"n": 0}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["worker", "--concurrency", "0"], "--concurrency: must be between 1 and 1000, got 0"),
        (["worker", "--concurrency", "-3"], "--concurrency: must be between 1 and 1000, got -3"),
        (["web", "--port", "99999"], "--port: must be between 1 and 65535, got 99999"),
        (["dev", "--port", "0"], "--port: must be between 1 and 65535, got 0"),
    ],
)
def test_bad_service_options_are_refused_before_anything_starts(
    db_url: str, args: list[str], message: str
) -> None:
    result = run_sundial(db_url, *args)
    assert result.returncode == 2, result.stderr
    assert f"sundial {args[0]}: error: argument {message}" in result.stderr
    assert "Traceback" not in result.stderr
    assert query(db_url, "SELECT count(*) AS n FROM workers") == [{"n": 0}]


UUID = "00000000-0000-0000-0000-000000000001"


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "noop"],
        ["show", "1"],
        ["cancel", "1"],
        ["retry", "1"],
        ["dag", "show", UUID],
        ["schedule", "list"],
        ["schedule", "add", "nightly", "--every", "60", "--handler", "noop"],
        ["schedule", "fires", "nightly"],
        ["schedule", "delete", "nightly"],
        ["job", "add", "extract", "--handler", "noop"],
        ["job", "list"],
        ["workflow", "list"],
        ["workflow", "delete", "etl"],
    ],
)
def test_every_command_refuses_an_unmigrated_database_with_one_sentence(
    empty_db_url: str, args: list[str]
) -> None:
    result = run_sundial(empty_db_url, *args)
    assert_one_sentence(result, args[0], 2)
    assert "run `sundial migrate` first" in result.stderr
    assert query(
        empty_db_url, "SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'"
    ) == [{"n": 0}]


def test_the_embedded_database_is_the_same_from_any_directory(open_tmp_path: Path) -> None:
    tmp_path = open_tmp_path  # the embedded server's own user must reach it
    home = tmp_path / "home"
    env = sundial_env("", HOME=str(home))
    for name in ("DATABASE_URL", "SUNDIAL_DATA_DIR", "XDG_DATA_HOME"):
        env.pop(name, None)

    def sundial_in(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
        directory.mkdir(exist_ok=True)
        return subprocess.run(
            sundial_cmd(*args), env=env, cwd=directory, capture_output=True, text=True, timeout=120
        )

    try:
        migrated = sundial_in(tmp_path / "project", "migrate")
        assert migrated.returncode == 0, migrated.stderr
        first = sundial_in(tmp_path / "project", "db", "url")
        second = sundial_in(tmp_path / "elsewhere", "db", "url")
        assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
        assert first.stdout == second.stdout
        listed = sundial_in(tmp_path / "elsewhere", "schedule", "list")
        assert listed.returncode == 0, listed.stderr  # migrated: the same database
        assert (home / ".local" / "share" / "sundial" / "pgdata" / "PG_VERSION").exists()
        assert not (tmp_path / "project" / ".sundial").exists()
        assert not (tmp_path / "elsewhere" / ".sundial").exists()
    finally:
        stopped = sundial_in(tmp_path / "elsewhere", "db", "stop")
        assert stopped.returncode == 0, stopped.stderr


@pytest.mark.parametrize("command", ["web", "dev"])
def test_a_port_in_use_is_one_sentence_and_exit_code_4(db_url: str, command: str) -> None:
    port = free_port()
    with socket.create_server(("0.0.0.0", port)):
        result = run_sundial(db_url, command, "--port", str(port))
    assert_one_sentence(result, command, 4)
    assert f"port {port} is already in use" in result.stderr
    assert query(db_url, "SELECT count(*) AS n FROM workers") == [{"n": 0}]


def test_workflow_delete_is_refused_while_a_schedule_runs_it(db_url: str, tmp_path: Path) -> None:
    define_jobs(db_url)
    assert run_sundial(db_url, "workflow", "add", "etl", write(tmp_path, ETL)).returncode == 0
    scheduled = run_sundial(
        db_url, "schedule", "add", "nightly", "--every", "60", "--workflow", "etl"
    )
    assert scheduled.returncode == 0, scheduled.stderr
    assert run_sundial(db_url, "schedule", "run-now", "nightly").returncode == 0

    refused = run_sundial(db_url, "workflow", "delete", "etl")
    assert_one_sentence(refused, "workflow", 2)
    assert "schedule(s) 'nightly'" in refused.stderr and "--with-schedules" in refused.stderr
    assert query(db_url, "SELECT count(*) AS n FROM workflows") == [{"n": 1}]
    assert query(db_url, "SELECT count(*) AS n FROM schedule_fires") == [{"n": 1}]

    deleted = run_sundial(db_url, "workflow", "delete", "etl", "--with-schedules")
    assert deleted.returncode == 0, deleted.stderr
    assert "workflow 'etl' deleted with schedule(s) 'nightly'" in deleted.stdout
    assert query(db_url, "SELECT count(*) AS n FROM schedules") == [{"n": 0}]
    assert query(db_url, "SELECT count(*) AS n FROM schedule_fires") == [{"n": 0}]
    assert query(db_url, "SELECT count(*) AS n FROM dag_runs") == [{"n": 1}]  # history stays


def test_workflow_delete_rule_lives_in_the_domain_function(db_url: str) -> None:
    """The dashboard and the API call `workflows.delete` too: the rule is there."""
    from app.catalog import workflows
    from app.core.db import transaction
    from app.scheduling import schedules

    assert run_sundial(db_url, "job", "add", "j", "--handler", "noop").returncode == 0
    with transaction(db_url) as conn:
        workflows.define(
            conn, workflows.WorkflowSpec("wf", {"a": workflow_shapes.Step("j")}), actor="test"
        )
        schedules.create_schedule(
            conn, schedule_spec.ScheduleSpec(name="s", every_seconds=60, workflow="wf")
        )
    with transaction(db_url) as conn, pytest.raises(workflows.WorkflowError, match="'s'"):
        workflows.delete(conn, "wf", actor="test")
    assert query(db_url, "SELECT count(*) AS n FROM schedules") == [{"n": 1}]
    with transaction(db_url) as conn:
        assert workflows.delete(conn, "wf", actor="test", with_schedules=True) == ["s"]
    assert query(db_url, "SELECT count(*) AS n FROM schedules") == [{"n": 0}]


def test_names_and_notes_are_printed_escaped(db_url: str, tmp_path: Path) -> None:
    name = f"evil{ESC}"
    # Names are refused with such characters now; ones stored before that rule still print
    # escaped, so these are renamed behind the CLI's back.
    refused = run_sundial(db_url, "schedule", "add", name, "--every", "60", "--handler", "noop")
    assert refused.returncode == 2 and "cannot contain control characters" in refused.stderr
    added = run_sundial(db_url, "schedule", "add", "evil", "--every", "60", "--handler", "noop")
    assert added.returncode == 0, added.stderr
    define_jobs(db_url)
    doc = {**ETL, "description": f"export{ESC}"}
    assert run_sundial(db_url, "workflow", "add", "etl", write(tmp_path, doc)).returncode == 0
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE schedules SET name = %s WHERE name = 'evil'", (name,))
        conn.execute("UPDATE workflows SET name = %s WHERE name = 'etl'", (f"etl{ESC}",))
    paused = run_sundial(db_url, "schedule", "pause", name, "--note", f"why{ESC}\u202e")
    assert paused.returncode == 0, paused.stderr

    schedule_list = run_sundial(db_url, "schedule", "list")
    workflow_list = run_sundial(db_url, "workflow", "list")
    missing = run_sundial(db_url, "schedule", "fires", f"nope{ESC}")
    unknown = run_sundial(db_url, "schedule", "list", f"extra{ESC}")
    outputs = (schedule_list.stdout, workflow_list.stdout, missing.stderr, unknown.stderr)
    for output in (*outputs, paused.stdout):
        assert "\x1b" not in output and "\u202e" not in output, output
    assert "evil\\x1b[2J\\x1b[H" in schedule_list.stdout
    assert "why\\x1b[2J\\x1b[H\\u202e" in schedule_list.stdout
    assert "etl\\x1b[2J\\x1b[H\tsteps=4\tschedules=0\texport\\x1b[2J" in workflow_list.stdout
    assert "nope\\x1b[2J" in missing.stderr
    assert "unrecognized arguments: extra\\x1b[2J" in unknown.stderr


def test_ctrl_c_in_dev_hands_the_running_run_back(db_url: str, tmp_path: Path) -> None:
    """honcho alone kills every process 5 s after Ctrl-C: a worker in its shutdown grace
    is killed with its run still `running`. Stopping must hand the run back."""
    log_path = tmp_path / "dev.log"
    env = sundial_env(db_url, SUNDIAL_SHUTDOWN_GRACE_SECONDS="8")
    proc = start_dev(env, free_port(), log_path)
    try:
        wait_until(lambda: "worker started:" in log_path.read_text(), "worker started")
        submitted = run_sundial(db_url, "submit", "sleep", "--args", json.dumps({"seconds": 600}))
        assert submitted.returncode == 0, submitted.stderr
        run_id = int(submitted.stdout)
        wait_until(lambda: run_row(db_url, run_id)["status"] == "running", "run is running")
    except AssertionError:
        os.killpg(proc.pid, signal.SIGKILL)
        print(log_path.read_text())
        raise
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal does
    proc.wait(60)
    output = log_path.read_text()
    assert "SIGKILL" not in output, output
    row = run_row(db_url, run_id)
    assert row["status"] == "pending", (row, output)  # handed back, ready for the next worker
    assert row["lease_owner"] is None, row


def test_output_cut_short_by_head_ends_quietly(conn: Any, db_url: str) -> None:
    """`sundial runs list --json | head -c 1`: the reader goes away after one byte, while
    the command still has far more to write than a pipe holds; no traceback, exit 0."""
    submission.submit_many(
        conn, [run_inserts.NewRun(handler="noop", args={"pad": "x" * 500})] * 500
    )
    command = " ".join(map(shlex.quote, sundial_cmd("runs", "list", "--limit", "500", "--json")))
    pipeline = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | head -c 1"],
        env=sundial_env(db_url),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert pipeline.stdout == "["
    assert pipeline.returncode == 0, pipeline.stderr  # sundial's own code, by pipefail
    assert "Traceback" not in pipeline.stderr and "BrokenPipe" not in pipeline.stderr, (
        pipeline.stderr
    )
    assert "Exception ignored" not in pipeline.stderr
