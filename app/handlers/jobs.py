"""What a worker hands an executor, what a handler sees, and what comes back.

These types are the boundary between the worker (claims, leases, finishes) and the
executors (run a handler in the right execution model, with timeout and cancellation).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

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


@dataclass(slots=True)
class JobContext:
    """Passed to every handler as its first argument.

    `idempotency_key` plus `attempt` lets a handler fence its own side effects, e.g. as a
    conditional write keyed by the run, refusing writes from an attempt older than the
    newest one seen. Long-running handlers should call `check_cancelled()` now and then:
    for thread jobs it is the only way a cancel or timeout can stop them.
    """

    run_id: int
    attempt: int
    idempotency_key: str | None
    fire_time: datetime | None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    # A DAG step's upstream results by step name (run id for `--after` edges).
    upstream: dict[str, JSON] = field(default_factory=dict)

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def check_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise Cancelled(f"run {self.run_id} attempt {self.attempt} was cancelled")

    @classmethod
    def for_job(cls, job: ClaimedRun) -> JobContext:
        return cls(
            job.run_id,
            job.attempt,
            job.idempotency_key,
            job.fire_time,
            upstream=job.upstream_results or {},
        )


class OutcomeStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


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

    @classmethod
    def completed(cls, result: JSON = None) -> Outcome:
        return cls(OutcomeStatus.COMPLETED, result=result)
