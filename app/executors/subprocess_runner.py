"""Subprocess jobs: a fresh `python -m app.executors.child` per attempt.

The child leads its own session, so a timeout or cancel kills its whole process group,
including anything the handler started; it kills that group itself when the worker dies
(see `app.executors.child_setup.die_with_worker`). It is started and awaited with asyncio's
subprocess API, so the event loop never blocks on it. Its stdout carries frames: the
handler's log lines while it runs, then the reply (see `app.executors.protocol`).
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
from app.executors.attempt import Attempt
from app.executors.child_setup import LIFELINE_ENV, STOP_SIGNAL
from app.executors.outcomes import failed, process_died
from app.executors.protocol import LinesSink, decode_reply, read_reply
from app.handlers.jobs import Outcome

CHILD_MODULE = "app.executors.child"
STOP_GRACE_SECONDS = 2.0


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


class SubprocessRunner:
    """Runs each attempt in its own child process; `running()` counts live children."""

    def __init__(self) -> None:
        self._running: set[asyncio.subprocess.Process] = set()
        self._closing = False

    def running(self) -> int:
        return len(self._running)

    async def run(self, attempt: Attempt, request: bytes, on_lines: LinesSink) -> Outcome:
        """Run the attempt in a new child; its log lines go to `on_lines` as they come."""
        if self._closing:
            return failed("the worker is shutting down; the job was not started")
        try:
            with child_launch() as (env, fds):
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    CHILD_MODULE,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    start_new_session=True,
                    env=env,
                    pass_fds=fds,
                )
        except OSError as exc:
            return failed(f"could not start a job process: {exc}")
        self._running.add(proc)
        attempt.on_stop = lambda: stop_child(proc.pid)
        try:
            if attempt.stop_status is not None:  # stopped while the child was starting
                stop_child(proc.pid)
            output = await _exchange(proc, request, on_lines)
        except BaseException:
            kill_group(proc.pid)
            raise
        finally:
            attempt.on_stop = None
            self._running.discard(proc)
        if attempt.stop_status is not None:
            return attempt.stopped_outcome()
        if proc.returncode != 0:
            return process_died(proc.returncode)
        if output is None:
            return failed("the job process exited without a reply", crashed=True)
        return decode_reply(output)

    async def close(self, *, kill: bool = False) -> None:
        self._closing = True
        if kill:
            for proc in self._running:
                kill_group(proc.pid)
        if self._running:
            await asyncio.gather(*(p.wait() for p in list(self._running)))


async def _exchange(
    proc: asyncio.subprocess.Process, request: bytes, on_lines: LinesSink
) -> bytes | None:
    """Send the request, pass on log lines until the reply, then wait for the exit."""
    assert proc.stdin is not None and proc.stdout is not None
    with contextlib.suppress(ConnectionError, OSError):  # it died first: no reply below
        proc.stdin.write(request)
        await proc.stdin.drain()
        proc.stdin.close()
    reply = await read_reply(proc.stdout, on_lines)
    await proc.wait()
    return reply
