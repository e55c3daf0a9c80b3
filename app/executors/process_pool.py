"""Process jobs: long-lived children, one job at a time each, killable one by one.

`concurrent.futures.ProcessPoolExecutor` cannot stop one job without breaking the whole
pool, so this pool keeps its own children: each is `python -m app.executors.pool_child`,
started with asyncio's subprocess API as the leader of its own session, taking framed
JSON requests on stdin and answering on stdout. A child that must be stopped (timeout,
cancel) is killed with its process group and replaced; a child that dies on its own
(segfault, `os._exit`, out of memory) fails the attempt it was running and is replaced.
Children die with the worker, even one killed with SIGKILL (see
`app.executors.child_setup.die_with_worker`).
Children are fresh interpreters, never forks of the worker with its threads, event loop
and database connections, and they never re-import the worker's `__main__`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from app.executors.attempt import Attempt
from app.executors.framing import encode_frame, read_frame
from app.executors.outcomes import describe_exit, failed, process_died
from app.executors.protocol import LinesSink, ProgressSink, decode_reply, read_reply
from app.executors.spawning import spawn_job_child, stop_child
from app.handlers.jobs import Outcome

log = logging.getLogger(__name__)

POOL_CHILD_MODULE = "app.executors.pool_child"
RESTART_DELAY_SECONDS = 1.0  # between attempts to replace a child that failed to start
CLOSE_WAIT_SECONDS = 5.0  # for children to finish and exit on close() before being killed


class ChildStartError(RuntimeError):
    """A pool child could not start, e.g. a handler module failed to import in it."""


class _Child:
    """One child process; `exited` resolves with its return code once it has ended."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.started = False
        self.busy = False
        self.killed = False
        self.exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def kill(self) -> None:
        """End the child and whatever its handler started (see `stop_child`)."""
        if not self.killed and not self.exited.done():
            self.killed = True
            stop_child(self.proc.pid)

    def close_stdin(self) -> None:
        """End of stdin: an idle child exits on its own."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()


class ProcessPool:
    """`size` children running process-model jobs; see the module docstring."""

    def __init__(self, size: int, handler_modules: tuple[str, ...] = ()) -> None:
        self.size = size
        self.handler_modules = handler_modules
        self.restarts = 0
        self._children: set[_Child] = set()
        self._idle: list[_Child] = []
        self._waiters: deque[asyncio.Future[_Child | None]] = deque()
        self._replacements: set[asyncio.Task[None]] = set()
        self._watchers: set[asyncio.Task[None]] = set()
        self._closing = False
        self._killing = False
        self._closed = asyncio.Event()

    # ---- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Start every child and wait until each has imported the handler modules."""
        results = await asyncio.gather(
            *(self._spawn() for _ in range(self.size)), return_exceptions=True
        )
        for result in results:
            if isinstance(result, _Child):
                self._release(result)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.close(kill=True)
            raise errors[0]

    async def close(self, *, kill: bool = False) -> None:
        """Stop all children: at once with `kill`; else idle ones get end of stdin and
        busy ones are given `CLOSE_WAIT_SECONDS` to finish before they are killed."""
        self._closing = True
        self._killing = kill
        self._closed.set()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        for child in list(self._children):
            if kill:
                child.kill()
            elif not child.busy:
                child.close_stdin()
        # A replacement being started sees `_closing` and gives up promptly.
        await asyncio.gather(*list(self._replacements), return_exceptions=True)
        exits = [c.exited for c in self._children]
        if exits:
            _, pending = await asyncio.wait(exits, timeout=None if kill else CLOSE_WAIT_SECONDS)
            if pending:
                for child in list(self._children):
                    child.kill()
                await asyncio.wait(pending)
        await asyncio.gather(*list(self._watchers), return_exceptions=True)

    # ---- running a job ------------------------------------------------------------------

    async def run(
        self,
        attempt: Attempt,
        request: bytes,
        on_start: Callable[[], object] | None = None,
        on_lines: LinesSink = lambda lines: None,
        on_progress: ProgressSink | None = None,
    ) -> Outcome:
        """Run the job on the first free child; `on_start` is called once a child has
        taken it (its timeout starts then, not while it waits for a child); the log lines
        it sends while it runs go to `on_lines`, its progress reports to `on_progress`."""
        child = await self._acquire(attempt)
        if attempt.stop_status is not None:
            if child is not None:
                self._release(child)
            return attempt.stopped_outcome()
        if child is None:
            return failed("the process pool closed before the job started")
        child.busy = True
        if on_start is not None:
            on_start()
        attempt.on_stop = child.kill  # its stdout then ends, which ends the wait below
        stdin, stdout = child.proc.stdin, child.proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(encode_frame(request))
            await stdin.drain()
            data = await read_reply(stdout, on_lines, on_progress)
        except (ConnectionError, OSError):  # the child died before it took the job
            data = None
        except asyncio.CancelledError:
            child.kill()  # nobody will wait for this job's result
            raise
        finally:
            attempt.on_stop = None
        if attempt.stop_status is not None:
            return attempt.stopped_outcome()
        if data is None:
            child.kill()  # in case it only closed its stdout
            return process_died(await child.exited)
        child.busy = False
        self._release(child)
        return decode_reply(data)

    async def _acquire(self, attempt: Attempt) -> _Child | None:
        if self._idle:
            return self._idle.pop()
        if self._closing:
            return None
        waiter: asyncio.Future[_Child | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)

        def give_up() -> None:
            if not waiter.done():
                waiter.set_result(None)

        attempt.on_stop = give_up
        try:
            return await waiter
        except asyncio.CancelledError:
            handed = waiter.result() if waiter.done() and not waiter.cancelled() else None
            if handed is not None:  # handed over just as we were cancelled
                self._release(handed)
            raise
        finally:
            attempt.on_stop = None

    def _release(self, child: _Child) -> None:
        """Give an idle child to the first live waiter, else put it back in the pool."""
        if child.killed or child.exited.done():
            return
        if self._closing:
            child.close_stdin()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(child)
                return
        self._idle.append(child)

    # ---- children -----------------------------------------------------------------------

    async def _spawn(self) -> _Child:
        proc = await spawn_job_child(POOL_CHILD_MODULE, *self.handler_modules)
        child = _Child(proc)
        self._children.add(child)
        self._in_background(self._watch(child), self._watchers)
        if self._killing:  # close(kill=True) began while this child was starting
            child.kill()
        assert proc.stdout is not None
        hello = await read_frame(proc.stdout)
        if hello is None:
            child.kill()
            code = await child.exited
            raise ChildStartError(f"a process child exited during start ({describe_exit(code)})")
        message = json.loads(hello)
        if not message.get("ready"):
            child.kill()
            raise ChildStartError(str(message.get("error", "a process child failed to start")))
        child.started = True
        return child

    async def _watch(self, child: _Child) -> None:
        """Wait for the child to end, forget it, and start a replacement if it was serving."""
        returncode = await child.proc.wait()
        self._children.discard(child)
        if child in self._idle:
            self._idle.remove(child)
        child.exited.set_result(returncode)
        if child.started and not child.killed and not child.busy and not self._closing:
            log.warning("an idle process child exited (%s)", describe_exit(returncode))
        if child.started and not self._closing:
            self._in_background(self._replace(), self._replacements)

    async def _replace(self) -> None:
        self.restarts += 1
        while not self._closing:
            try:
                child = await self._spawn()
            except Exception:
                if self._closing:
                    return
                log.exception("could not start a replacement process child")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closed.wait(), RESTART_DELAY_SECONDS)
                continue
            self._release(child)
            return

    @staticmethod
    def _in_background(coro: Coroutine[Any, Any, None], tasks: set[asyncio.Task[None]]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)  # a reference, so the task is not garbage-collected while it runs
        task.add_done_callback(tasks.discard)

    # ---- observing ----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "processes_total": self.size,
            "processes_alive": sum(1 for c in self._children if c.started),
            "processes_busy": sum(1 for c in self._children if c.busy),
            "process_restarts": self.restarts,
        }
