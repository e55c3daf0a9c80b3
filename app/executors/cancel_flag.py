"""A `threading.Event` that builds its lock only when someone sets it or waits on it.

Every attempt gets a fresh `JobContext.cancel_event`. A plain `threading.Event` costs a
Condition and a Lock (several microseconds) even though almost no run is ever cancelled,
which is a noticeable share of an async no-op run; this one costs one attribute until used.
"""

from __future__ import annotations

import threading

_creation_lock = threading.Lock()


class CancelFlag(threading.Event):
    """Drop-in `threading.Event`; `is_set()` never touches the lazily built Condition."""

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
