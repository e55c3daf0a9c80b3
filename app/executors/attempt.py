"""One attempt in flight: its context, why it was stopped, and how to stop it."""

from __future__ import annotations

import math
from collections.abc import Callable

from app.executors.outcomes import stopped
from app.handlers.cancel_flag import CancelFlag
from app.handlers.jobs import ClaimedRun, JobContext, Outcome, OutcomeStatus


class Attempt:
    """Tracks a running attempt so its deadline or `Executors.cancel` can stop it.

    `on_stop` is set by the execution model for its current phase (cancel the task,
    wake the waiting coroutine, kill the child); `stop` calls it at most once.
    """

    __slots__ = ("ctx", "deadline", "job", "on_stop", "stop_status")

    def __init__(self, job: ClaimedRun) -> None:
        self.job = job
        self.ctx = JobContext(
            job.run_id,
            job.attempt,
            job.idempotency_key,
            job.fire_time,
            CancelFlag(),
            upstream=job.upstream_results or {},
        )
        self.stop_status: OutcomeStatus | None = None
        self.on_stop: Callable[[], object] | None = None
        self.deadline = math.inf  # loop time; set by `Deadlines.arm`

    def stop(self, status: OutcomeStatus) -> None:
        """Stop the attempt as TIMED_OUT or CANCELLED; the first reason wins."""
        if self.stop_status is not None:
            return
        self.stop_status = status
        self.ctx.cancel_event.set()  # the cooperative token, for thread jobs
        if self.on_stop is not None:
            self.on_stop()

    def stopped_outcome(self) -> Outcome:
        assert self.stop_status is not None
        return stopped(self.stop_status, self.job.timeout_seconds)
