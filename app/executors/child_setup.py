"""What every job child does first, before it imports handlers or reads a request."""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import BinaryIO

from app.handlers.job_process import become_job_child


def prepare_job_child() -> tuple[BinaryIO, int]:
    """Set up this process as a job child; returns (requests stream, replies fd).

    - Requests come on the original stdin and replies go to the original stdout; fd 0
      then reads /dev/null and fd 1 (and `print`) writes to stderr, so a handler can
      neither swallow a request nor corrupt a reply.
    - The child leads its own process group, which the worker kills as a whole.
    - SIGTERM is ignored: Heroku and honcho send it to every process, but the worker
      decides when a job child ends (end of stdin, or SIGKILL), so a graceful shutdown
      lets running jobs finish. A handler, not SIG_IGN, so commands the job starts do
      not inherit the immunity.
    """
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    become_job_child()
    signal.signal(signal.SIGTERM, _ignore)
    return requests, replies


def _ignore(signum: int, frame: FrameType | None) -> None:
    pass
