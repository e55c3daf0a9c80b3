"""Thread jobs: a pool of daemon threads, and the slots that stopped jobs leak.

A thread cannot be killed. A stopped thread job is told through `ctx.cancel_event` and its
attempt ends at once; its thread stays busy (a leaked slot) until the handler returns, and
that late result is dropped. The pool starts a thread in its place at once, so jobs
claimed after it do not queue behind it (and time out without having run); the leaked
thread exits when its handler returns. The threads are daemons so a handler that never
returns cannot keep the worker from exiting (ThreadPoolExecutor joins its threads at exit).
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from app.executors.attempt import Attempt
from app.executors.invoke import invoke
from app.executors.outcomes import failed
from app.handlers.jobs import Outcome
from app.handlers.registry import RegisteredHandler

_WorkItem = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]


class DaemonThreadPool:
    """Up to `size` daemon threads taking calls from one queue, started as calls need
    them, plus one in place of each call given up on; `busy` counts running calls."""

    def __init__(self, size: int, name: str = "sundial-job") -> None:
        self.size = size
        self.name = name
        self._queue: queue.SimpleQueue[_WorkItem | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._busy = 0
        self._given_up: set[Future[Any]] = set()  # their threads exit when they return
        self._threads: list[threading.Thread] = []
        # Threads start as calls need them (a worker running async jobs needs none), up to
        # `size`. Under the lock: threads idle and not yet promised a call, and calls
        # queued with no thread promised to them (every thread was busy).
        self._slots = 0
        self._idle = 0
        self._unserved = 0

    def _add_thread(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def give_up(self, future: Future[Any]) -> bool:
        """Stop counting on a running call: a new thread takes its place (for up to `size`
        calls given up at once, so handlers that never return cannot make threads without
        bound), and its own thread exits once the call returns. False if the call already
        returned."""
        with self._lock:
            if future.done():
                return False
            if len(self._given_up) < self.size:
                self._given_up.add(future)
                self._add_thread()  # takes the given-up thread's slot
                self._serve_or_idle()
            return True

    @property
    def busy(self) -> int:
        return self._busy

    def alive(self) -> int:
        return sum(1 for thread in self._threads if thread.is_alive())

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._slots < self.size:
                self._slots += 1
                self._add_thread()
            else:
                self._unserved += 1
        self._queue.put((future, fn, args))
        return future

    def _serve_or_idle(self) -> None:
        """A thread is free (under the lock): it takes a call that waits, or idles."""
        if self._unserved:
            self._unserved -= 1
        else:
            self._idle += 1

    def shutdown(self) -> None:
        """Let each thread exit once it is idle; does not wait (leaked threads may not)."""
        for _ in self._threads:
            self._queue.put(None)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args = item
            del item
            if not future.set_running_or_notify_cancel():
                continue
            with self._lock:
                self._busy += 1
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)
            finally:
                with self._lock:
                    self._busy -= 1
                    replaced = future in self._given_up
                    self._given_up.discard(future)
                    if not replaced:
                        self._serve_or_idle()
                del future, fn, args
            if replaced:
                return  # a thread took this one's place when its call was given up


class ThreadRunner:
    """Runs attempts on a `DaemonThreadPool`, counting the slots stopped jobs still hold."""

    def __init__(self, size: int) -> None:
        self.pool = DaemonThreadPool(size)
        self._leaked: set[Future[Any]] = set()

    def leaked_slots(self) -> int:
        # Pruned here, on the loop, so no thread ever touches the set.
        self._leaked = {f for f in self._leaked if not f.done()}
        return len(self._leaked)

    async def run(
        self, attempt: Attempt, entry: RegisteredHandler, args: dict[str, Any]
    ) -> Outcome:
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        def wake_from_thread(_: Future[Any]) -> None:
            try:
                loop.call_soon_threadsafe(wake)
            except RuntimeError:  # the loop has closed; nobody is waiting any more
                pass

        # In a copy of this task's context, so the run's log capture (app.runs.run_logs) holds.
        job = self.pool.submit(contextvars.copy_context().run, invoke, entry, attempt.ctx, args)
        job.add_done_callback(wake_from_thread)
        attempt.on_stop = wake
        try:
            await woken
        except asyncio.CancelledError:
            attempt.ctx.cancel_event.set()
            self._forget(job)
            raise
        finally:
            attempt.on_stop = None
        if attempt.stop_status is not None:
            self._forget(job)
            return attempt.stopped_outcome()
        exc = job.exception()
        if exc is not None:  # invoke() catches handler errors; this is a bug or an abort
            return failed(f"thread job aborted: {type(exc).__name__}: {exc}")
        outcome: Outcome = job.result()
        return outcome

    def _forget(self, job: Future[Any]) -> None:
        """Drop a stopped job: cancel it if it has not started, else count its slot and
        let a new thread take its place."""
        if not job.cancel() and self.pool.give_up(job):
            self._leaked.add(job)
