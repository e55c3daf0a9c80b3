"""Starting a job child and stopping it: the one way the process-pool and subprocess
executors start `python -m MODULE` for jobs.

The child leads its own session, gets the worker's environment without its secrets (they
come over a pipe it reads once it is non-dumpable, see `app.core.process_secrets`) and the
lifeline pipe that tells it the worker died; its stdin and stdout carry the framed
protocol (`app.executors.protocol`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator

from app.core.launcher import lifeline
from app.core.process_secrets import SECRETS_FD_ENV, secrets_pipe, without_secrets
from app.executors.child_setup import LIFELINE_ENV, STOP_SIGNAL

STOP_GRACE_SECONDS = 2.0


async def spawn_job_child(module: str, *args: str) -> asyncio.subprocess.Process:
    """`python -m module args` as a job child, piped for the framed protocol."""
    with child_launch() as (env, fds):
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=env,
            pass_fds=fds,
        )


def child_environment() -> dict[str, str]:
    """The worker's environment without its secrets, with its import path, so the child
    finds the same code, and the number of the lifeline pipe it inherits."""
    env = without_secrets(os.environ)
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env[LIFELINE_ENV] = str(lifeline())
    return env


@contextlib.contextmanager
def child_launch() -> Iterator[tuple[dict[str, str], tuple[int, ...]]]:
    """(environment, fds to pass) for starting one job child: `child_environment()`, and a
    pipe carrying the secrets, read by the child once it is non-dumpable (see
    `app.core.process_secrets`)."""
    env = child_environment()
    with secrets_pipe(os.environ) as secrets_fd:
        env[SECRETS_FD_ENV] = str(secrets_fd)
        yield env, (lifeline(), secrets_fd)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stop_child(pid: int) -> None:
    """Stop a job child's run: it ends everything its handler started (detached processes
    too) and its group itself; its group is killed anyway after STOP_GRACE_SECONDS, in case
    a handler keeps it from answering the signal."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, STOP_SIGNAL)
    asyncio.get_running_loop().call_later(STOP_GRACE_SECONDS, kill_group, pid)
