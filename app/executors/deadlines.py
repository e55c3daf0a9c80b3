"""Timeouts for every attempt in flight, with one timer for all of them.

A `loop.call_later()` per attempt costs about as much as running an async no-op job
itself (creating, cancelling and sweeping the handle), so instead each attempt keeps its
deadline and a single timer is armed for the earliest one. When it fires, attempts past
their deadline are stopped as TIMED_OUT and the timer is re-armed for the next earliest
deadline. Attempts that end early are never touched; a timer firing for one of them just
re-arms. With similar timeouts the timer fires about once per timeout period.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

from app.executors.attempt import Attempt
from app.handlers.jobs import OutcomeStatus

SLACK_SECONDS = 0.001  # asyncio may fire a timer up to its clock resolution early


class Deadlines:
    """Stops attempts in `active` once they pass their `deadline`."""

    def __init__(self, active: Mapping[Any, Attempt]) -> None:
        self._active = active
        self._timer: asyncio.TimerHandle | None = None
        self._next_check = math.inf

    def arm(self, attempt: Attempt, timeout_seconds: float) -> None:
        """Give `attempt` a deadline `timeout_seconds` from now (none if <= 0)."""
        if timeout_seconds <= 0:
            return
        loop = asyncio.get_running_loop()
        deadline = attempt.deadline = loop.time() + timeout_seconds
        if deadline < self._next_check:
            self._schedule(loop, deadline)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._next_check = math.inf

    def _schedule(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._next_check = when
        self._timer = loop.call_at(when, self._check, loop)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._next_check = math.inf
        now = loop.time() + SLACK_SECONDS
        earliest = math.inf
        for attempt in list(self._active.values()):
            if attempt.stop_status is not None:
                continue
            if attempt.deadline <= now:
                attempt.stop(OutcomeStatus.TIMED_OUT)
            elif attempt.deadline < earliest:
                earliest = attempt.deadline
        if earliest < math.inf:
            self._schedule(loop, earliest)
