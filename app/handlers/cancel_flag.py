"""A `threading.Event` that builds its lock only when someone sets it or waits on it, and
wakes coroutines waiting for it without their polling it.

Every attempt gets a fresh `JobContext.cancel_event`. A plain `threading.Event` costs a
Condition and a Lock (several microseconds) even though almost no run is ever cancelled,
which is a noticeable share of an async no-op run; this one costs one attribute until used.

A handler that waits (the built-in `sleep`, `JobContext.wait_cancelled`) registers a waker
instead of looking at the flag now and then: under the `thread` model the flag is the only
way a stop reaches it, and thousands of waits each waking every few milliseconds cost a
worker much of its CPU.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

_creation_lock = threading.Lock()


class CancelFlag(threading.Event):
    """Drop-in `threading.Event`; `is_set()` never touches the lazily built Condition."""

    # A class default, so a flag nobody waits on costs no list.
    _wakers: list[Callable[[], object]] | None = None

    def __init__(self) -> None:  # no super().__init__(): it would build the Condition now
        self._flag = False
        self._lazy_cond: threading.Condition | None = None

    @property
    def _cond(self) -> threading.Condition:
        cond = self._lazy_cond
        if cond is None:
            with _creation_lock:  # two threads must not build two Conditions
                if self._lazy_cond is None:
                    self._lazy_cond = threading.Condition(threading.Lock())
                cond = self._lazy_cond
        return cond

    def set(self) -> None:
        super().set()
        for wake in list(self._wakers or ()):
            wake()  # in the setting thread: a waker must be quick and must not raise

    def add_waker(self, wake: Callable[[], object]) -> None:
        """Call `wake()` once the flag is set, in the thread that sets it. A flag set
        before this call does not call it: look at `is_set()` after adding."""
        if self._wakers is None:
            with _creation_lock:
                if self._wakers is None:
                    self._wakers = []
        self._wakers.append(wake)

    def remove_waker(self, wake: Callable[[], object]) -> None:
        with contextlib.suppress(ValueError, AttributeError):  # not (or no longer) added
            self._wakers.remove(wake)  # type: ignore[union-attr]
