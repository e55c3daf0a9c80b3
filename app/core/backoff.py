"""Exponential backoff with full jitter, for job retries and for reconnecting."""

from __future__ import annotations

import random

DEFAULT_BASE_SECONDS = 1.0
DEFAULT_CAP_SECONDS = 300.0


def full_jitter(
    attempt: int,
    base: float = DEFAULT_BASE_SECONDS,
    cap: float = DEFAULT_CAP_SECONDS,
    rand: random.Random | None = None,
) -> float:
    """A delay drawn uniformly from [0, min(cap, base * 2**attempt)].

    Full jitter spreads the retries of many runs that failed together (a downstream
    outage) so their recovery is not a thundering herd.
    """
    ceiling = min(cap, base * 2 ** max(0, min(attempt, 62)))
    return (rand or random).uniform(0, ceiling)


class Backoff:
    """Growing delays for one retrying loop; `reset()` after a success."""

    def __init__(self, base: float = 0.2, cap: float = 10.0) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0

    def next_delay(self) -> float:
        delay = max(self.base / 2, full_jitter(self.failures, self.base, self.cap))
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0
