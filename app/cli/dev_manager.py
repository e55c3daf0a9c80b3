"""The process manager of `sundial dev`: honcho's, with a stop that respects the grace."""

from __future__ import annotations

import time

from honcho.manager import Manager

# After the worker's shutdown grace, time to hand its unfinished runs back and exit.
STOP_MARGIN_SECONDS = 10.0


class GracefulManager(Manager):  # type: ignore[misc]  # honcho has no type hints
    """honcho's Manager, except that processes asked to stop get the worker's shutdown grace
    and a margin before SIGKILL, not honcho's fixed 5 seconds: a worker needs that long to
    let its runs finish and hand the others back, or they stay `running` until their lease
    expires."""

    def __init__(self, shutdown_grace_seconds: float) -> None:
        super().__init__()
        self.kill_after = shutdown_grace_seconds + STOP_MARGIN_SECONDS
        self.stop_asked_at: float | None = None

    def terminate(self) -> None:
        if self.stop_asked_at is None:
            self.stop_asked_at = time.monotonic()
        super().terminate()

    def kill(self) -> None:
        if self.stop_asked_at is None or time.monotonic() - self.stop_asked_at >= self.kill_after:
            super().kill()
