"""What a worker hands an executor, what a handler sees, and what comes back.

These types are the boundary between the worker (claims, leases, finishes) and the
executors (run a handler in the right execution model, with timeout and cancellation).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.core import limits
from app.handlers.cancel_flag import CancelFlag

JSON = dict[str, Any] | list[Any] | str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    """One claimed attempt of a run, as the executor needs it."""

    run_id: int
    attempt: int  # the fencing token
    handler: str
    args: dict[str, Any]
    execution_model: str
    timeout_seconds: float
    idempotency_key: str | None = None
    fire_time: datetime | None = None
    upstream_results: dict[str, JSON] | None = None  # DAG steps: upstream name -> result
    crash_count: int = 0  # > 0: it crashed before, so it runs alone, in a child of its own


class Cancelled(Exception):
    """Raised by `JobContext.check_cancelled()` once the run was cancelled or timed out."""


class NonRetryableError(Exception):
    """Raise from a handler to fail the run at once, without retries (a dead letter)."""


MIN_SNOOZE_SECONDS = 0.001  # a snooze must put the run back for some time


class Snooze(Exception):  # a request, not an error: `raise Snooze(600, "...")` works too
    """Raised by `JobContext.snooze()` (or by a handler itself): put the run back in its
    queue, due again in `seconds`, without spending an attempt; `reason` is shown on the
    run's page. Let it propagate: a handler that catches it does not snooze."""

    def __init__(self, seconds: float, reason: str) -> None:
        self.seconds = limits.check_seconds("snooze seconds", seconds, MIN_SNOOZE_SECONDS,
                                            limits.MAX_SNOOZE_SECONDS)  # fmt: skip
        self.reason = limits.check_text("snooze reason", reason, limits.MAX_SNOOZE_REASON_LENGTH)
        if not self.reason.strip():
            raise limits.LimitError("snooze reason must say why (it is shown on the run's page)")
        super().__init__(f"snoozed for {self.seconds:g}s: {self.reason}")


def check_progress(value: Any, message: Any = None) -> tuple[float, str | None]:
    """A progress report as it is stored: a finite number within ±2^53 and an optional
    message of at most MAX_PROGRESS_MESSAGE_LENGTH characters; LimitError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise limits.LimitError(f"progress must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or abs(value) > limits.ARGS_FLOAT_MAX:
        raise limits.LimitError(f"progress must be a finite number within ±2^53, got {value!r}")
    if message is not None:
        message = limits.check_text("progress message", message,
                                    limits.MAX_PROGRESS_MESSAGE_LENGTH)  # fmt: skip
    return float(value), message


# Where a context sends its progress: the worker's board, or a child's relay to the worker.
ProgressSink = Callable[[float, str | None], object]


@dataclass(slots=True)
class JobContext:
    """Passed to every handler as its first argument.

    `idempotency_key` plus `attempt` lets a handler fence its own side effects, e.g. as a
    conditional write keyed by the run, refusing writes from an attempt older than the
    newest one seen. Long-running handlers should call `check_cancelled()` now and then:
    for thread jobs it is the only way a cancel or timeout can stop them. An async handler
    that waits should `await ctx.wait_cancelled(seconds)`: it returns at once when the run
    is stopped, in every execution model, without waking until then.

    From inside a job: `ctx.progress(40, "copied 40 of 100 files")` shows how far it got on
    the run's page (cheap: the worker writes the latest report about once a second), and
    `ctx.snooze(600, "the export is not ready yet")` puts the run back for later without
    spending an attempt.
    """

    run_id: int
    attempt: int
    idempotency_key: str | None
    fire_time: datetime | None
    cancel_event: threading.Event = field(default_factory=CancelFlag)
    # A DAG step's upstream results by step name (run id for `--after` edges).
    upstream: dict[str, JSON] = field(default_factory=dict)
    # Set by the executor; without one (a handler called directly) progress goes nowhere.
    on_progress: ProgressSink | None = field(default=None, repr=False)

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def check_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise Cancelled(f"run {self.run_id} attempt {self.attempt} was cancelled")

    async def wait_cancelled(self, seconds: float) -> bool:
        """Wait up to `seconds` for the run to be cancelled (or to time out): True
        as soon as it is, False once the time is up. Nothing runs until one of the two
        happens, so thousands of waiting runs cost no CPU. Under the `async` model a stop
        also cancels the waiting task, which raises CancelledError here as usual."""
        flag = self.cancel_event
        if flag.is_set():
            return True
        if seconds <= 0:
            return False
        if not isinstance(flag, CancelFlag):  # a plain Event passed in: it cannot wake us
            return await _poll_flag(flag, seconds)
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake() -> None:  # in whichever thread sets the flag
            try:
                loop.call_soon_threadsafe(_resolve, woken)
            except RuntimeError:  # that loop has closed: nobody waits any more
                pass

        timer = loop.call_later(seconds, _resolve, woken)
        flag.add_waker(wake)
        try:
            if not flag.is_set():  # it may have been set before the waker was in place
                await woken
        finally:
            timer.cancel()
            flag.remove_waker(wake)
        return flag.is_set()

    def progress(self, value: float, message: str | None = None) -> None:
        """Report how far the job got: a number (percent, items done, ...) and an optional
        short message, shown live on the run's page. Call it as often as you like; the
        latest report wins."""
        report = check_progress(value, message)
        if self.on_progress is not None:
            self.on_progress(*report)

    def snooze(self, seconds: float, reason: str) -> None:
        """Put the run back in its queue, due again in `seconds` (at most 30 days), without
        spending an attempt; `reason` is shown on its page. Raises `Snooze`: nothing after
        this call runs."""
        raise Snooze(seconds, reason)

    @classmethod
    def for_job(cls, job: ClaimedRun) -> JobContext:
        return cls(
            job.run_id,
            job.attempt,
            job.idempotency_key,
            job.fire_time,
            upstream=job.upstream_results or {},
        )


POLL_SECONDS = 0.05  # how often a wait looks at a cancel flag that cannot wake it


async def _poll_flag(flag: threading.Event, seconds: float) -> bool:
    deadline = asyncio.get_running_loop().time() + seconds
    while not flag.is_set():
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(POLL_SECONDS, remaining))
    return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class OutcomeStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    SNOOZED = "snoozed"  # the handler asked to run again later (run_snooze_many)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended. `retryable` is False for NonRetryableError, unknown handlers
    and results that cannot be stored; the run then fails without further attempts."""

    status: OutcomeStatus
    result: JSON = None
    error: str | None = None
    traceback: str | None = None
    retryable: bool = True
    # The process running the handler died without answering (killed, segfault, exit).
    crashed: bool = False
    # Lines a process or subprocess child captured: (unix time, stream, line); see
    # app.runs.run_logs. In-process attempts send theirs to the worker's collector directly.
    logs: tuple[tuple[float, str, str], ...] = field(default=(), compare=False)
    # SNOOZED: due again this many seconds after its finish is recorded, and why.
    snooze_seconds: float = 0.0
    snooze_reason: str | None = None

    @classmethod
    def completed(cls, result: JSON = None) -> Outcome:
        return cls(OutcomeStatus.COMPLETED, result=result)

    @classmethod
    def snoozed(cls, snooze: Snooze) -> Outcome:
        return cls(
            OutcomeStatus.SNOOZED, snooze_seconds=snooze.seconds, snooze_reason=snooze.reason
        )
