"""The fleet's decision about the `shell` handler, on a real database: every submit path
refuses it while it is off, the admin command turns it on and off, the handler refuses
to run once it is off, and a command sees a minimal environment."""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.catalog import workflows
from app.catalog.workflows import WorkflowSpec
from app.dags import dag_submission
from app.dags.workflow_shapes import Step
from app.executors import Executors
from app.handlers import default_registry
from app.handlers.gate import SHELL_DISABLED_MESSAGE, HandlerDisabled, set_shell_enabled
from app.handlers.jobs import ClaimedRun, JobContext, NonRetryableError, Outcome, OutcomeStatus
from app.handlers.shell import CommandFailed, run_command
from app.runs import submission
from app.runs.run_inserts import NewRun
from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleSpec
from tests.helpers.commands import run_sundial
from tests.helpers.databases import count
from tests.helpers.processes import run_row, services
from tests.helpers.waits import wait_until, wait_until_gone

Conn = psycopg.Connection[Any]
_run_ids = itertools.count(1)
SHELL_RUN = NewRun("shell", {"command": "true"})


def context() -> JobContext:
    return JobContext(run_id=next(_run_ids), attempt=1, idempotency_key=None, fire_time=None)


def run_job(handler: str, model: str = "async", timeout: float = 10.0, **args: Any) -> Outcome:
    async def main() -> Outcome:
        executors = Executors(default_registry, thread_workers=2, process_workers=0)
        await executors.start()
        try:
            return await executors.run(ClaimedRun(next(_run_ids), 1, handler, args, model, timeout))
        finally:
            await executors.close(kill=True)

    return asyncio.run(main())


@pytest.fixture
def worker_env(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process plays a worker: the handler finds the database in DATABASE_URL."""
    monkeypatch.setenv("DATABASE_URL", db_url)


@pytest.fixture
def shell_on(conn: Conn, worker_env: None) -> None:
    set_shell_enabled(conn, True, actor="test")


# ---- refused where work enters ------------------------------------------------------------


def test_submits_of_shell_are_refused_while_it_is_disabled(conn: Conn) -> None:
    with pytest.raises(HandlerDisabled) as caught:
        submission.submit(conn, SHELL_RUN)
    assert str(caught.value) == SHELL_DISABLED_MESSAGE
    with pytest.raises(HandlerDisabled):
        submission.submit_many(conn, [NewRun("noop"), SHELL_RUN])
    with pytest.raises(HandlerDisabled):
        dag_submission.submit_dag(conn, {"a": NewRun("noop"), "b": SHELL_RUN}, [("a", "b")])
    with pytest.raises(HandlerDisabled):
        schedules.create_schedule(
            conn, ScheduleSpec(name="every-minute", every_seconds=60, handler="shell")
        )
    assert [count(conn, t) for t in ("job_runs", "dag_runs", "schedules", "job_definitions")] == [
        0,
        0,
        0,
        0,
    ]


def test_stored_shell_jobs_are_refused_once_it_is_disabled(conn: Conn) -> None:
    """Job definitions made while shell was enabled cannot be scheduled, put in a
    workflow, changed or run once an admin disables it."""
    set_shell_enabled(conn, True, actor="test")
    schedules.create_schedule(conn, ScheduleSpec(name="cleanup", every_seconds=60, handler="shell"))
    workflows.define(conn, WorkflowSpec("nightly", {"clean": Step("cleanup")}), actor="test")
    schedules.create_schedule(
        conn, ScheduleSpec(name="nightly", cron="0 3 * * *", workflow="nightly")
    )
    set_shell_enabled(conn, False, actor="test")

    refused = [
        lambda: schedules.create_schedule(
            conn, ScheduleSpec(name="again", every_seconds=60, job="cleanup")
        ),
        lambda: schedules.create_schedule(
            conn, ScheduleSpec(name="again", every_seconds=60, workflow="nightly")
        ),
        lambda: schedules.update_schedule(conn, "cleanup", {"every_seconds": 120}),
        lambda: schedules.update_schedule(conn, "nightly", {"cron": "0 4 * * *"}),
        lambda: schedules.run_now(conn, "cleanup"),
        lambda: schedules.run_now(conn, "nightly"),
        lambda: workflows.define(
            conn, WorkflowSpec("other", {"clean": Step("cleanup")}), actor="test"
        ),
        lambda: workflows.run_now(conn, "nightly"),
    ]
    for attempt in refused:
        with pytest.raises(HandlerDisabled):
            attempt()
    assert count(conn, "schedules") == 2 and count(conn, "workflows") == 1
    assert count(conn, "job_runs") == 0


def test_the_cli_refuses_shell_with_one_sentence(db_url: str) -> None:
    for command in (
        ("submit", "shell", "--args", '{"command": "true"}'),
        ("job", "add", "cleanup", "--handler", "shell"),
        ("schedule", "add", "cleanup", "--every", "60", "--handler", "shell"),
    ):
        result = run_sundial(db_url, *command)
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"sundial {command[0]}: error: {SHELL_DISABLED_MESSAGE}\n"


def test_the_admin_command_decides_for_the_fleet_and_is_audited(db_url: str, conn: Conn) -> None:
    status = run_sundial(db_url, "shell-handler", "status")
    assert status.returncode == 0 and "the shell handler is disabled" in status.stdout
    enabled = run_sundial(db_url, "shell-handler", "enable")
    assert enabled.returncode == 0 and "the shell handler is enabled" in enabled.stdout
    submitted = run_sundial(db_url, "submit", "shell", "--args", '{"command": "true"}')
    assert submitted.returncode == 0, submitted.stderr
    disabled = run_sundial(db_url, "shell-handler", "disable")
    assert disabled.returncode == 0 and "the shell handler is disabled" in disabled.stdout
    assert run_sundial(db_url, "submit", "shell", "--args", "{}").returncode == 2
    audit = conn.execute("SELECT action, target_id, details FROM audit_log ORDER BY id").fetchall()
    assert [(a["target_id"], a["details"]["value"]) for a in audit] == [
        ("shell_handler_enabled", True),
        ("shell_handler_enabled", False),
    ]
    bad = run_sundial(db_url, "shell-handler", "maybe")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


# ---- refused where work runs --------------------------------------------------------------


def test_the_handler_refuses_to_run_while_disabled_whatever_the_worker_env_says(
    worker_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SUNDIAL_ENABLE_SHELL_HANDLER", "true")  # no longer a way around
    marker = tmp_path / "ran"
    with pytest.raises(NonRetryableError) as caught:
        run_command(context(), command=["touch", str(marker)])
    assert str(caught.value) == SHELL_DISABLED_MESSAGE
    outcome = run_job("shell", "subprocess", command=["touch", str(marker)])
    assert outcome.status is OutcomeStatus.FAILED and not outcome.retryable
    assert not marker.exists()


def test_a_worker_does_not_run_shell_submitted_before_it_was_disabled(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    set_shell_enabled(conn, True, actor="test")
    run_id = submission.submit(conn, NewRun("shell", {"command": ["touch", str(marker)]})).id
    set_shell_enabled(conn, False, actor="test")
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: run_row(db_url, run_id)["status"] == "failed", "run failed", 30, worker)
    row = run_row(db_url, run_id)
    assert row["attempt"] == 1 and SHELL_DISABLED_MESSAGE in row["last_error"]
    assert not marker.exists()


# ---- what a command sees ------------------------------------------------------------------


@pytest.mark.usefixtures("shell_on")
def test_a_command_sees_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "the-secret-key")
    monkeypatch.setenv("SUNDIAL_KEEP_RUNS_DAYS", "7")
    monkeypatch.setenv("REPORT_BUCKET", "s3://reports")
    monkeypatch.setenv("UNRELATED", "x")
    result = run_command(context(), command=["env"])
    names = {line.split("=", 1)[0] for line in result["stdout"].splitlines()}
    assert "PATH" in names
    assert names <= {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ"} | {
        "TMPDIR",
        "PWD",  # env(1) does not add it, but some shells export it
        "JOB_CONTROL_FILE",  # where it may report progress or snooze: a path, no setting
    }
    passed = run_command(
        context(), command=["env"], pass_env=["REPORT_BUCKET"], env={"GREETING": "hi"}
    )
    lines = passed["stdout"].splitlines()
    assert "REPORT_BUCKET=s3://reports" in lines and "GREETING=hi" in lines
    assert not any(re.match(r"(DATABASE_URL|SECRET_KEY|SUNDIAL_|UNRELATED)", x) for x in lines)


@pytest.mark.usefixtures("shell_on")
@pytest.mark.parametrize("name", ["DATABASE_URL", "SECRET_KEY", "SUNDIAL_HANDLERS"])
def test_pass_env_cannot_hand_over_sundial_settings(name: str) -> None:
    with pytest.raises(NonRetryableError, match=f"cannot pass {name}"):
        run_command(context(), command=["env"], pass_env=[name])


# ---- running commands (enabled) -----------------------------------------------------------


@pytest.mark.usefixtures("shell_on")
def test_shell_runs_a_list_or_a_string_with_env_and_cwd(tmp_path: Path) -> None:
    assert run_command(context(), command=["echo", "hello"]) == {
        "returncode": 0,
        "stdout": "hello\n",
        "stderr": "",
    }
    result = run_command(
        context(),
        command="echo $GREETING; pwd; echo oops >&2",
        env={"GREETING": "hi"},
        cwd=str(tmp_path),
    )
    assert result["stdout"] == f"hi\n{tmp_path}\n" and result["stderr"] == "oops\n"


@pytest.mark.usefixtures("shell_on")
def test_shell_non_zero_exit_fails_with_the_stderr_tail() -> None:
    with pytest.raises(CommandFailed, match="exited with code 3: went wrong"):
        run_command(context(), command="echo went wrong >&2; exit 3")


@pytest.mark.usefixtures("shell_on")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"command": []}, "argument 'command'"),
        ({"command": 5}, "argument 'command'"),
        ({"command": ["true"], "env": {"A": 1}}, "argument 'env'"),
        ({"command": ["true"], "pass_env": "HOME"}, "argument 'pass_env'"),
        ({"command": ["true"], "timeout": -1}, "argument 'timeout'"),
        ({"command": ["/no/such/program"]}, "cannot run '/no/such/program'"),
    ],
)
def test_shell_refuses_bad_arguments(args: dict[str, Any], message: str) -> None:
    with pytest.raises(NonRetryableError, match=re.escape(message)):
        run_command(context(), **args)


@pytest.mark.usefixtures("shell_on")
def test_shell_kills_the_command_at_its_own_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(CommandFailed, match=re.escape("longer than its timeout of 0.2s")):
        run_command(context(), command=f"echo $$ > {pid_file}; exec sleep 30", timeout=0.2)
    wait_until_gone(int(pid_file.read_text()))


@pytest.mark.usefixtures("shell_on")
@pytest.mark.parametrize("model", ["thread", "subprocess"])
def test_shell_command_is_killed_when_the_job_times_out(tmp_path: Path, model: str) -> None:
    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file}; exec sleep 30"
    # The command must have started before the job times out: a subprocess job first
    # starts Python and reads the fleet's decision. On a machine too slow for that, try
    # again with twice the timeout, so the test checks the same thing on any machine.
    for timeout in (5.0, 10.0, 20.0, 40.0):
        outcome = run_job("shell", model, timeout=timeout, command=command)
        assert outcome.status is OutcomeStatus.TIMED_OUT
        if pid_file.exists() and pid_file.read_text().strip():
            break
    else:
        pytest.fail("the command never started before the job timed out")
    wait_until_gone(int(pid_file.read_text()))
