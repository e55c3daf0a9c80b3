"""The `shell` built-in: run a command, killable on cancel and timeout. Off by default.

Running arbitrary commands from job arguments is a deliberate choice of an admin, made
once for the whole deployment (`sundial shell-handler enable`, see `app.handlers.gate`):
submits are refused while it is off, and the handler reads the decision again before it
runs a command. The command gets a minimal environment, never the worker's own: Sundial's
settings (DATABASE_URL, SECRET_KEY, SUNDIAL_*) must not end up in a command or its output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from app.core import launcher
from app.core.config import Settings
from app.core.launcher import lifeline
from app.core.process_secrets import is_secret
from app.handlers.args import number, optional_string, string_list, string_map
from app.handlers.jobs import JobContext, NonRetryableError
from app.handlers.shell_control import CONTROL_VARIABLE, ControlReader

OUTPUT_TAIL_BYTES = 4096  # of stdout and of stderr, kept in the result
POLL_SECONDS = 0.05  # how often a running command checks for cancellation
LAUNCHER_STOP_SECONDS = 5  # for the launcher to end a stopped command and its descendants
# What a command inherits from the worker; anything else only through `env` or `pass_env`.
BASE_ENVIRONMENT = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
SUNDIAL_PREFIX = "SUNDIAL_"


class CommandFailed(RuntimeError):
    """The command exited with a non-zero code or ran past its own timeout."""


def run_command(
    ctx: JobContext,
    command: Any = None,
    timeout: Any = None,
    cwd: Any = None,
    env: Any = None,
    pass_env: Any = None,
) -> dict[str, Any]:
    """Run `command` (a list of strings, or a string for /bin/sh -c).

    Returns `{"returncode", "stdout", "stderr"}` with the tail of each stream. The command
    sees PATH, HOME, USER, LOGNAME, LANG, LC_ALL, LC_CTYPE, TZ and TMPDIR of the worker,
    the worker's variables named in `pass_env` (a list), and `env` (names to values), and
    JOB_CONTROL_FILE, where it may report progress or ask to snooze
    (`app.handlers.shell_control`); `timeout` (seconds) bounds the command itself.
    """
    argv = _argv(command)
    limit = number("timeout", timeout, minimum=0.001, allow_none=True)
    directory = optional_string("cwd", cwd)
    environment = command_environment(env, pass_env, os.environ)
    _refuse_unless_enabled()
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory(prefix="sundial-run-") as folder,
    ):
        control = ControlReader(Path(folder) / "control", ctx)
        control.path.touch(mode=0o600)
        environment[CONTROL_VARIABLE] = str(control.path)
        # Under the launcher, in a session of its own: whatever the command starts, even
        # detached, ends with the run, or with this process however it dies.
        alive = lifeline()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", launcher.__file__, str(alive), *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=directory,
                env=environment,
                start_new_session=True,
                pass_fds=(alive,),
            )
        except OSError as exc:
            raise NonRetryableError(f"cannot run {argv[0]!r}: {exc}") from exc
        returncode = _wait(proc, ctx, limit, control)
        stdout, stderr = _tail(out), _tail(err)
        control.poll(ended=True)
    if control.snooze is not None:  # whatever its exit code: it asked to come back later
        ctx.snooze(control.snooze.seconds, control.snooze.reason)
    if returncode == launcher.CANNOT_RUN and stderr.startswith(launcher.CANNOT_RUN_PREFIX):
        reason = stderr.removeprefix(launcher.CANNOT_RUN_PREFIX).strip()
        raise NonRetryableError(f"cannot run {reason}")
    if returncode != 0:
        raise CommandFailed(f"command exited with code {returncode}: {stderr or stdout}")
    return {"returncode": returncode, "stdout": stdout, "stderr": stderr}


def command_environment(env: Any, pass_env: Any, worker_env: Mapping[str, str]) -> dict[str, str]:
    """The minimal environment of a command: the base variables, the ones `pass_env`
    names (never Sundial's own settings), then `env`."""
    environment = {name: worker_env[name] for name in BASE_ENVIRONMENT if name in worker_env}
    environment.setdefault("PATH", os.defpath)
    for name in string_list("pass_env", pass_env):
        if is_secret(name) or name.startswith(SUNDIAL_PREFIX):
            raise NonRetryableError(
                f"argument 'pass_env' cannot pass {name}: Sundial's own settings never "
                "reach a command"
            )
        if name in worker_env:
            environment[name] = worker_env[name]
    return {**environment, **string_map("env", env)}


def _refuse_unless_enabled() -> None:
    """The admin's decision, read when the command is about to run: a run submitted while
    `shell` was enabled does not run once it is disabled. (The database driver is imported
    here: a job child that runs no command starts without it.)"""
    from app.core.db import connect, resolve_database_url
    from app.handlers.gate import SHELL_DISABLED_MESSAGE, shell_enabled

    with connect(resolve_database_url(Settings.from_env()), autocommit=True) as conn:
        if not shell_enabled(conn):
            raise NonRetryableError(SHELL_DISABLED_MESSAGE)


def _argv(command: Any) -> list[str]:
    if isinstance(command, str) and command.strip():
        return ["/bin/sh", "-c", command]
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        return list(command)
    raise NonRetryableError(
        f"argument 'command' must be a string or a non-empty list of strings, got {command!r}"
    )


def _wait(
    proc: subprocess.Popen[bytes], ctx: JobContext, limit: float, control: ControlReader
) -> int:
    """Wait for the command, passing on the progress it reports, killing it once the run
    is cancelled or `limit` passes."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return proc.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        control.poll()
        if ctx.cancelled or time.monotonic() >= deadline:
            _kill(proc)
            ctx.check_cancelled()
            raise CommandFailed(f"command ran longer than its timeout of {limit:g}s")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Ask the launcher to end the command and everything it started; kill its group if it
    does not within a few seconds."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=LAUNCHER_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _tail(stream: IO[bytes]) -> str:
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - OUTPUT_TAIL_BYTES))
    return stream.read().decode(errors="replace")
