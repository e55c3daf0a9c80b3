"""When a dependency's circuit breaker changes state, and when its retries wait: pure, so
every rule is tested alone. `app.runs.breakers` reads what the rules need and applies them.

    closed     -> open       when at least `min_calls` calls in the window ended and the
                             share that failed reached `failure_threshold`
    open       -> half_open  when the cool-off has passed (never while opened by hand)
    half_open  -> open       when a trial run's call failed
    half_open  -> closed     when no trial run is left waiting or running, none failed
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

# Retries may always run this many per retry window, however few first attempts there
# were: a budget of 10 % of 3 first attempts would hold even one retry back.
RETRY_FLOOR = 3


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class Seen:
    """A breaker as the reaper reads it: its state and settings, and its calls lately
    (in its window while closed, since it went half-open while half-open)."""

    state: BreakerState
    manual: bool
    failure_threshold: float
    min_calls: int
    reopen_at: datetime | None
    calls: int = 0
    failures: int = 0
    trials_left: int = 0  # trial runs (half-open) still waiting or running
    retry_budget: float | None = None
    retries: int = 0  # calls that were retries, in the retry window
    first_calls: int = 0  # calls that were first attempts, in the retry window


@dataclass(frozen=True, slots=True)
class Change:
    to: BreakerState
    reason: str


def next_change(seen: Seen, now: datetime) -> Change | None:
    """The state change the breaker is due, with its reason in words; None: none due."""
    if seen.manual:
        return None
    if seen.state is BreakerState.CLOSED:
        if seen.calls >= seen.min_calls and seen.failures >= seen.failure_threshold * seen.calls:
            return Change(
                BreakerState.OPEN, f"{seen.failures} of its last {seen.calls} calls failed"
            )
    elif seen.state is BreakerState.OPEN:
        if seen.reopen_at is not None and now >= seen.reopen_at:
            return Change(BreakerState.HALF_OPEN, "its cool-off is over: a few trial runs go")
    elif seen.failures:
        return Change(BreakerState.OPEN, "a trial run's call failed")
    elif not seen.trials_left:
        return Change(BreakerState.CLOSED, "its trial runs succeeded")
    return None


def retries_held(seen: Seen) -> bool:
    """Whether the retry budget is spent: retries lately reached `retry_budget` of the
    first attempts (and at least RETRY_FLOOR)."""
    if seen.retry_budget is None:
        return False
    allowed = max(RETRY_FLOOR, math.floor(seen.retry_budget * seen.first_calls))
    return seen.retries >= allowed
