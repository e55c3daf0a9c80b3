"""`Executors`: runs each claimed attempt under its execution model, with timeout and
cancellation, and always answers with an `Outcome`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from app.executors.attempt import Attempt
from app.executors.deadlines import Deadlines
from app.executors.outcomes import completed, failed, from_exception, unknown_handler
from app.executors.process_pool import ProcessPool
from app.executors.protocol import BadRequest, encode_request
from app.executors.subprocess_runner import SubprocessRunner
from app.executors.thread_pool import ThreadRunner
from app.handlers.execution_models import ExecutionModel
from app.handlers.jobs import ClaimedRun, Outcome, OutcomeStatus
from app.handlers.registry import (
    HandlerRegistry,
    RegisteredHandler,
    UnknownHandler,
    default_registry,
)

_ASYNC = ExecutionModel.ASYNC.value
_THREAD = ExecutionModel.THREAD.value
_PROCESS = ExecutionModel.PROCESS.value
_SUBPROCESS = ExecutionModel.SUBPROCESS.value


class Executors:
    """Runs attempts for the worker: `async`, `thread`, `process` and `subprocess`.

    Use:

        executors = Executors(default_registry, thread_workers=8, process_workers=2,
                              handler_modules=settings.handler_modules)
        await executors.start()
        outcome = await executors.run(job)        # never raises; one task per job
        executors.cancel(job.run_id, job.attempt)  # from any task on the same loop
        await executors.close(kill=True)

    Stopping a job: call `cancel(run_id, attempt)` (cancel requested, lease lost, shutdown
    hand-back); the pending `run()` then returns CANCELLED. Passing an `asyncio.Event` as
    `run(job, cancel)` works too but costs a watcher task per job; the worker should use
    `cancel()`. A job's `timeout_seconds` (> 0; 0 means none) ends it as TIMED_OUT.

    How each model stops a job:
    - `async`: the handler is awaited in the caller's task, which is cancelled. A plain
      `def` handler under `async` runs on the thread pool instead, so it cannot block the
      event loop.
    - `thread`: `ctx.cancel_event` is set (cooperative) and `run()` returns at once; the
      thread's slot counts as leaked (`stats()["leaked_thread_slots"]`) until the handler
      returns, and its late result is dropped. A new thread takes the leaked one's place at
      once, so the pool keeps `thread_workers` threads for new jobs.
    - `process`: the child running it is killed (with its process group) and replaced.
    - `subprocess`: the child's process group is killed.

    A suspect (`job.crash_count > 0`: its worker died under it before) of the `async` or
    `thread` model runs as `subprocess` instead (when `registry` is `default_registry`); if
    its child dies without answering, the outcome says `crashed`.

    `process` and `subprocess` children look handlers up in `default_registry` after
    importing `handler_modules`, so a handler registered only on another registry object
    in the worker is unknown there. They send their handler's log lines while it runs:
    to `on_child_lines((run_id, attempt), lines)` as they come when it is set (the
    worker sets it to its log collector), else at the front of `Outcome.logs`.

    Progress a handler reports (`ctx.progress`) goes to `on_progress((run_id, attempt),
    value, message)` in every model: straight from the context in this process, as a
    message from a child (checked again there: a child's word is not trusted).
    """

    def __init__(
        self,
        registry: HandlerRegistry,
        *,
        thread_workers: int,
        process_workers: int,
        handler_modules: tuple[str, ...] = (),
        on_child_lines: Callable[[tuple[int, int], list[Any]], object] | None = None,
    ) -> None:
        self.registry = registry
        self.on_child_lines = on_child_lines
        # Called with (run_id, attempt), value, message as handlers report progress; the
        # worker sets it to its progress board (app.runs.run_progress).
        self.on_progress: Callable[[tuple[int, int], Any, Any], object] | None = None
        # Called with (run_id, attempt) when a process run's pool child takes it: the other
        # models begin as soon as they are claimed.
        self.on_begin: Callable[[tuple[int, int]], object] | None = None
        self.thread_workers = thread_workers
        self.process_workers = process_workers
        self.handler_modules = tuple(handler_modules)
        # Suspects can run in a child only if the child finds their handlers (see below).
        self._isolates = registry is default_registry
        self._active: dict[tuple[int, int], Attempt] = {}
        self._deadlines = Deadlines(self._active)
        self._threads: ThreadRunner | None = None
        self._processes: ProcessPool | None = None
        self._processes_started: asyncio.Task[None] | None = None
        self._subprocesses = SubprocessRunner()
        self._started = False
        self._closing = False
        self._drained: asyncio.Future[None] | None = None

    # ---- lifecycle ----------------------------------------------------------------------

    async def start(self, *, processes: bool = True) -> None:
        """Start the thread pool (its threads start as jobs need them) and, with
        `processes`, the process children (which import the handler modules); raises if a
        child cannot start. Without `processes` the children start when the first process
        job comes, so a worker that runs none never starts them. Idempotent."""
        if not self._started:
            self._started = True
            self._threads = ThreadRunner(max(1, self.thread_workers))
        if processes and self.process_workers > 0:
            try:
                await self._process_pool()
            except BaseException:
                if self._threads is not None:
                    self._threads.pool.shutdown()
                self._threads, self._started = None, False
                raise

    async def _process_pool(self, attempt: Attempt | None = None) -> ProcessPool | None:
        """The started process pool, started now if no job needed it yet; concurrent first
        process jobs wait for the one start. None if `attempt` was stopped meanwhile.
        Raises (and forgets the pool, so the next job tries again) if a child cannot start."""
        if self._processes is None:
            self._processes = ProcessPool(self.process_workers, self.handler_modules)
            self._processes_started = asyncio.get_running_loop().create_task(
                self._processes.start()
            )
            self._processes_started.add_done_callback(_retrieve)  # a stopped job left
        pool, starting = self._processes, self._processes_started
        assert starting is not None
        if not starting.done():
            woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def wake() -> None:
                if not woken.done():
                    woken.set_result(None)

            if attempt is not None:
                attempt.on_stop = wake
            try:  # not cancelled with the waiting job: others may wait for it too
                await asyncio.wait({starting, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if attempt is not None:
                    attempt.on_stop = None
            if not starting.done():
                return None
        error = starting.exception()
        if error is not None:
            if self._processes is pool:
                self._processes, self._processes_started = None, None
            raise error
        return pool

    async def close(self, *, kill: bool = False) -> None:
        """Stop accepting jobs. `kill=False` waits for running attempts to finish;
        `kill=True` stops them at once (CANCELLED) and kills every child."""
        self._closing = True
        if kill:
            for attempt in list(self._active.values()):
                attempt.stop(OutcomeStatus.CANCELLED)
        elif self._active:
            if self._drained is None:
                self._drained = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drained)
        if self._processes is not None:
            await self._processes.close(kill=kill)
        if self._processes_started is not None:  # a start under way ends once closed
            await asyncio.wait({self._processes_started})
        await self._subprocesses.close(kill=kill)
        if self._threads is not None:
            self._threads.pool.shutdown()
        self._deadlines.close()

    # ---- running ------------------------------------------------------------------------

    def cancel(self, run_id: int, attempt: int) -> bool:
        """Stop that attempt if it runs here; its `run()` returns CANCELLED. Call on the
        worker's event loop. False when the attempt is not (or no longer) running."""
        running = self._active.get((run_id, attempt))
        if running is None:
            return False
        running.stop(OutcomeStatus.CANCELLED)
        return True

    async def run(self, job: ClaimedRun, cancel: asyncio.Event | None = None) -> Outcome:
        """Run one attempt to its end and say how it ended; never raises (except
        `CancelledError` when the calling task itself is cancelled)."""
        if self._closing:
            return failed("the worker is shutting down; the job was not started")
        if job.crash_count and job.execution_model in (_ASYNC, _THREAD) and self._isolates:
            # It crashed before: in a child of its own, another crash ends only that child,
            # and the worker lives to report it (see run_crash_many).
            job = replace(job, execution_model=_SUBPROCESS)
        try:
            entry = self.registry.get(job.handler)
        except UnknownHandler as exc:
            return unknown_handler(exc)
        if cancel is None and self._started and job.execution_model == _ASYNC and entry.is_async:
            return await self._run_on_loop(job, entry)  # the hot path: kept free of extras
        if not self._started:
            await self.start(processes=False)
        if cancel is not None and cancel.is_set():
            return Outcome(OutcomeStatus.CANCELLED, error="cancelled before it started")
        attempt = self._begin(job)
        watcher = (
            asyncio.get_running_loop().create_task(_watch(cancel, attempt))
            if cancel is not None
            else None
        )
        try:
            if job.execution_model == _ASYNC and entry.is_async:
                return await self._run_on_loop(job, entry, attempt)
            return await self._route(attempt, entry)
        except Exception as exc:  # a bug in an executor; the attempt fails, the worker lives
            return failed(f"executor error: {type(exc).__name__}: {exc}")
        finally:
            if watcher is not None:
                watcher.cancel()
            self._end(attempt)

    def _begin(self, job: ClaimedRun) -> Attempt:
        """Track the attempt so `cancel()` finds it, and give it its deadline. A process
        job's deadline starts once a pool child takes it: a timeout measures the handler's
        own run time, not the wait for a free child."""
        attempt = Attempt(job)
        self._active[(job.run_id, job.attempt)] = attempt
        if self.on_progress is not None:
            attempt.ctx.on_progress = partial(self.on_progress, (job.run_id, job.attempt))
        if job.execution_model != _PROCESS:
            self._deadlines.arm(attempt, job.timeout_seconds)
        return attempt

    def _end(self, attempt: Attempt) -> None:
        self._active.pop((attempt.job.run_id, attempt.job.attempt), None)
        if self._drained is not None and not self._active and not self._drained.done():
            self._drained.set_result(None)

    async def _run_on_loop(
        self,
        job: ClaimedRun,
        entry: RegisteredHandler,
        tracked: Attempt | None = None,
    ) -> Outcome:
        """Await an async handler in the caller's task. A stop cancels that task (as
        asyncio.timeout() does) and the cancellation is absorbed here with `uncancel()`.
        Without `tracked`, this call begins and ends the attempt itself."""
        attempt = tracked if tracked is not None else self._begin(job)
        task = asyncio.current_task()
        assert task is not None
        attempt.on_stop = task.cancel
        try:
            result = await entry.fn(attempt.ctx, **job.args)
        except asyncio.CancelledError as exc:
            if attempt.stop_status is None and task.cancelling() == 0:
                # Raised by the handler itself, not a cancellation: an error of the attempt.
                outcome = from_exception(exc, entry, job.args)
            # Ours if we stopped it and nobody else also cancelled the task.
            elif attempt.stop_status is None or task.uncancel() > 0:
                raise
            else:
                return attempt.stopped_outcome()
        except BaseException as exc:  # SystemExit too: it must not end the worker's loop
            outcome = from_exception(exc, entry, job.args)
        else:
            outcome = completed(entry, result)
        finally:
            attempt.on_stop = None
            if tracked is None:
                self._end(attempt)
        if attempt.stop_status is not None:  # stopped, but the handler swallowed it
            task.uncancel()
            return attempt.stopped_outcome()
        return outcome

    async def _route(self, attempt: Attempt, entry: RegisteredHandler) -> Outcome:
        model = attempt.job.execution_model
        args = attempt.job.args
        if model == _ASYNC or model == _THREAD:  # a plain `def` under async: a thread
            assert self._threads is not None
            return await self._threads.run(attempt, entry, args)
        if model == _PROCESS or model == _SUBPROCESS:
            try:
                request = encode_request(attempt.job, self.handler_modules)
            except BadRequest as exc:
                return failed(str(exc), retryable=False)
            return await self._in_child(attempt, request)
        known = ", ".join(m.value for m in ExecutionModel)
        return failed(f"unknown execution model {model!r} (known: {known})", retryable=False)

    async def _in_child(self, attempt: Attempt, request: bytes) -> Outcome:
        """A process or subprocess attempt; the lines its child sends while it runs go to
        `on_child_lines`, or else before the reply's own in `Outcome.logs`."""
        key = (attempt.job.run_id, attempt.job.attempt)
        early: list[Any] = []
        sink = self.on_child_lines
        on_lines = early.extend if sink is None else lambda lines: sink(key, lines)
        on_progress = None if self.on_progress is None else partial(self.on_progress, key)
        if attempt.job.execution_model == _SUBPROCESS:
            outcome = await self._subprocesses.run(attempt, request, on_lines, on_progress)
        elif self.process_workers <= 0:
            return failed("this worker has no process pool (process_workers=0)")
        else:
            try:
                pool = await self._process_pool(attempt)  # started with the first process run
            except Exception as exc:
                return failed(f"the process pool could not start: {exc}")
            if pool is None:
                return attempt.stopped_outcome()
            began = partial(self._began, attempt)
            outcome = await pool.run(attempt, request, began, on_lines, on_progress)
        return replace(outcome, logs=(*early, *outcome.logs)) if early else outcome

    def _began(self, attempt: Attempt) -> None:
        """A pool child took a process run: its timeout starts, and the worker is told."""
        self._deadlines.arm(attempt, attempt.job.timeout_seconds)
        if self.on_begin is not None:
            self.on_begin((attempt.job.run_id, attempt.job.attempt))

    # ---- observing ----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Pool saturation for the workers table and /metrics: `running`, `threads_total`,
        `threads_alive` (leaked threads included), `threads_busy` (includes leaked),
        `leaked_thread_slots`, `processes_total`,
        `processes_alive`, `processes_busy`, `process_restarts`, `subprocesses_running`."""
        threads = self._threads
        doc: dict[str, Any] = {
            "running": len(self._active),
            "threads_total": threads.pool.size if threads else 0,
            "threads_alive": threads.pool.alive() if threads else 0,
            "threads_busy": threads.pool.busy if threads else 0,
            "leaked_thread_slots": threads.leaked_slots() if threads else 0,
            "processes_total": self.process_workers,
            "processes_alive": 0,
            "processes_busy": 0,
            "process_restarts": 0,
            "subprocesses_running": self._subprocesses.running(),
        }
        if self._processes is not None:
            doc.update(self._processes.stats())
        return doc


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark a task's error as seen (its waiters, if any, got it too)."""
    if not task.cancelled():
        task.exception()


async def _watch(cancel: asyncio.Event, attempt: Attempt) -> None:
    await cancel.wait()
    attempt.stop(OutcomeStatus.CANCELLED)
