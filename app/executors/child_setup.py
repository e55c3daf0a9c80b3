"""What every job child does first, before it imports handlers or reads a request."""

from __future__ import annotations

import os
import signal
from types import FrameType

from app.handlers.job_process import become_job_child


def prepare_job_child() -> int:
    """Set up this process as a job child; returns the fd on which to write replies.

    - Replies go to the original stdout; fd 1 (and `print`) then points at stderr, so a
      handler's output cannot corrupt them.
    - The child leads its own process group, which the worker kills as a whole.
    - SIGTERM is ignored: Heroku and honcho send it to every process, but the worker
      decides when a job child ends (end of stdin, or SIGKILL), so a graceful shutdown
      lets running jobs finish. A handler, not SIG_IGN, so commands the job starts do
      not inherit the immunity.
    """
    replies = os.dup(1)
    os.dup2(2, 1)
    become_job_child()
    signal.signal(signal.SIGTERM, _ignore)
    return replies


def _ignore(signum: int, frame: FrameType | None) -> None:
    pass
