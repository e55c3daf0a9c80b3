"""Subprocess jobs: a fresh `python -m app.executors.child` per attempt.

The child leads its own session, so a timeout or cancel kills its whole process group,
including anything the handler started; it kills that group itself when the worker dies
(see `app.executors.child_setup.die_with_worker`). It is started and awaited with asyncio's
subprocess API (`app.executors.spawning`, shared with the process pool), so the event loop
never blocks on it. Its stdout carries frames: the
handler's log lines while it runs, then the reply (see `app.executors.protocol`).
"""

from __future__ import annotations

import asyncio
import contextlib

from app.executors.attempt import Attempt
from app.executors.outcomes import failed, process_died
from app.executors.protocol import LinesSink, ProgressSink, decode_reply, read_reply
from app.executors.spawning import kill_group, spawn_job_child, stop_child
from app.handlers.jobs import Outcome

CHILD_MODULE = "app.executors.child"


class SubprocessRunner:
    """Runs each attempt in its own child process; `running()` counts live children."""

    def __init__(self) -> None:
        self._running: set[asyncio.subprocess.Process] = set()
        self._closing = False

    def running(self) -> int:
        return len(self._running)

    async def run(
        self,
        attempt: Attempt,
        request: bytes,
        on_lines: LinesSink,
        on_progress: ProgressSink | None = None,
    ) -> Outcome:
        """Run the attempt in a new child; its log lines go to `on_lines` and its progress
        reports to `on_progress` as they come."""
        if self._closing:
            return failed("the worker is shutting down; the job was not started")
        try:
            proc = await spawn_job_child(CHILD_MODULE)
        except OSError as exc:
            return failed(f"could not start a job process: {exc}")
        self._running.add(proc)
        attempt.on_stop = lambda: stop_child(proc.pid)
        try:
            if attempt.stop_status is not None:  # stopped while the child was starting
                stop_child(proc.pid)
            output = await _exchange(proc, request, on_lines, on_progress)
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
    proc: asyncio.subprocess.Process,
    request: bytes,
    on_lines: LinesSink,
    on_progress: ProgressSink | None,
) -> bytes | None:
    """Send the request, pass on log lines and progress until the reply, then wait for
    the exit."""
    assert proc.stdin is not None and proc.stdout is not None
    with contextlib.suppress(ConnectionError, OSError):  # it died first: no reply below
        proc.stdin.write(request)
        await proc.stdin.drain()
        proc.stdin.close()
    reply = await read_reply(proc.stdout, on_lines, on_progress)
    await proc.wait()
    return reply
