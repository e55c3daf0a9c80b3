"""The `shell` built-in: run a command, killable on cancel and timeout. Off by default.

Running arbitrary commands from job arguments is a deliberate choice of an operator, so
the handler refuses to run unless `SUNDIAL_ENABLE_SHELL_HANDLER` is true.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from typing import IO, Any

from app.config import Settings
from app.handlers.args import number, optional_string, string_map
from app.handlers.job_process import is_job_child
from app.jobs import JobContext, NonRetryableError

OUTPUT_TAIL_BYTES = 4096  # of stdout and of stderr, kept in the result
POLL_SECONDS = 0.05  # how often a running command checks for cancellation
DISABLED_MESSAGE = "the shell handler is disabled; set SUNDIAL_ENABLE_SHELL_HANDLER=true"


class CommandFailed(RuntimeError):
    """The command exited with a non-zero code or ran past its own timeout."""


def run_command(
    ctx: JobContext,
    command: Any = None,
    timeout: Any = None,
    cwd: Any = None,
    env: Any = None,
) -> dict[str, Any]:
    """Run `command` (a list of strings, or a string for /bin/sh -c).

    Returns `{"returncode", "stdout", "stderr"}` with the tail of each stream. `env` is
    added to the worker's environment; `timeout` (seconds) bounds the command itself.
    """
    if not Settings.from_env().enable_shell_handler:
        raise NonRetryableError(DISABLED_MESSAGE)
    argv = _argv(command)
    limit = number("timeout", timeout, minimum=0.001, allow_none=True)
    directory = optional_string("cwd", cwd)
    environment = {**os.environ, **string_map("env", env)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=directory,
                env=environment,
                # In the worker the command needs its own group to be killed alone; in a
                # job child it stays in the child's group, which the executor kills.
                start_new_session=not is_job_child(),
            )
        except OSError as exc:
            raise NonRetryableError(f"cannot run {argv[0]!r}: {exc}") from exc
        returncode = _wait(proc, ctx, limit)
        stdout, stderr = _tail(out), _tail(err)
    if returncode != 0:
        raise CommandFailed(f"command exited with code {returncode}: {stderr or stdout}")
    return {"returncode": returncode, "stdout": stdout, "stderr": stderr}


def _argv(command: Any) -> list[str]:
    if isinstance(command, str) and command.strip():
        return ["/bin/sh", "-c", command]
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        return list(command)
    raise NonRetryableError(
        f"argument 'command' must be a string or a non-empty list of strings, got {command!r}"
    )


def _wait(proc: subprocess.Popen[bytes], ctx: JobContext, limit: float) -> int:
    """Wait for the command, killing it once the run is cancelled or `limit` passes."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return proc.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        if ctx.cancelled or time.monotonic() >= deadline:
            _kill(proc)
            ctx.check_cancelled()
            raise CommandFailed(f"command ran longer than its timeout of {limit:g}s")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        if is_job_child():
            # The command shares this child's group, so only it can be killed here; when
            # the job itself is stopped, the executor's group kill takes everything.
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _tail(stream: IO[bytes]) -> str:
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - OUTPUT_TAIL_BYTES))
    return stream.read().decode(errors="replace")
