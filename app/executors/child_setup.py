"""What every job child does first, before it imports handlers or reads a request."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import BinaryIO

from app.core.launcher import become_subreaper, end_descendants
from app.core.logs import JsonFormatter
from app.core.process_secrets import make_non_dumpable, receive_secrets
from app.handlers.job_process import become_job_child

# The worker passes the read end of a pipe whose write end only the worker holds: when
# the worker ends, however it ends, reads there see end of file.
LIFELINE_ENV = "SUNDIAL_LIFELINE_FD"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def prepare_job_child() -> tuple[BinaryIO, int]:
    """Set up this process as a job child; returns (requests stream, replies fd).

    - It makes itself non-dumpable, then reads the worker's secrets from their pipe into
      `os.environ` (see `app.core.process_secrets`): they are never in its /proc environment.
    - Requests come on the original stdin and replies go to the original stdout; fd 0
      then reads /dev/null and fd 1 (and `print`) writes to stderr, so a handler can
      neither swallow a request nor corrupt a reply.
    - The child leads its own process group, which the worker kills as a whole.
    - The child dies with its worker, taking its process group along (see
      `die_with_worker`), so no job outlives a worker killed with SIGKILL.
    - SIGTERM is ignored while the worker lives: Heroku and honcho send it to every
      process, but the worker decides when a job child ends (end of stdin, or SIGKILL),
      so a graceful shutdown lets running jobs finish. A handler, not SIG_IGN, so
      commands the job starts do not inherit the immunity.
    """
    make_non_dumpable()  # first: from here on, commands it starts cannot read its memory
    receive_secrets()
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    become_job_child()
    become_subreaper()  # what its handler starts stays below it, even detached
    die_with_worker()
    signal.signal(STOP_SIGNAL, _on_stop)
    return requests, replies


def die_with_worker() -> None:
    """Kill this child's process group as soon as the worker that started it is gone.

    Two ways, so that one covers the other: on Linux the kernel sends SIGTERM when the
    worker dies (PR_SET_PDEATHSIG), and the SIGTERM handler checks whether the worker is
    still the parent; everywhere, a thread waits for end of file on the lifeline pipe.
    """
    worker = os.getppid()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if os.getppid() != worker:
            kill_own_group()

    signal.signal(signal.SIGTERM, on_sigterm)
    _set_parent_death_signal(signal.SIGTERM)
    lifeline = _inherited_lifeline()
    if lifeline is not None:
        threading.Thread(
            target=_wait_for_end_of, args=(lifeline,), name="lifeline", daemon=True
        ).start()
    if os.getppid() != worker:  # the worker died before the signal was armed
        kill_own_group()


def _inherited_lifeline() -> int | None:
    """The lifeline's fd, if the worker passed one that is open here."""
    try:
        fd = int(os.environ.pop(LIFELINE_ENV, ""))
        os.set_inheritable(fd, False)  # the job's own commands need not hold it
    except (ValueError, OSError):
        return None
    return fd


# The worker asks a job child to stop its run with this signal (a timeout, a cancel): the
# child ends everything its handler started, detached processes too, then its own group.
# SIGTERM is not it: see `prepare_job_child`.
STOP_SIGNAL = signal.SIGUSR1


def _on_stop(signum: int, frame: FrameType | None) -> None:
    kill_own_group()


def kill_own_group() -> None:
    """SIGKILL everything this child's handler started, then the child and its group."""
    end_descendants()
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _wait_for_end_of(fd: int) -> None:
    while os.read(fd, 1):
        pass  # nothing is ever written; only end of file matters
    kill_own_group()


def _set_parent_death_signal(sig: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def send_reply(fd: int, reply: bytes, run_id: object, attempt: object) -> bool:
    """Write `reply` to the worker; False (after one JSON log line on stderr) when the
    worker has gone and the pipe is broken."""
    view = memoryview(reply)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        log_worker_gone(run_id, attempt)
        return False
    return True


def log_worker_gone(run_id: object, attempt: object) -> None:
    """One JSON line, not a traceback: the reaper re-runs the attempt."""
    record = logging.makeLogRecord(
        {
            "name": __name__,
            "levelname": "WARNING",
            "msg": "the worker is gone (broken pipe); the reply is dropped and the run's "
            "lease will expire",
            "run_id": run_id,
            "attempt": attempt,
        }
    )
    sys.stderr.write(JsonFormatter("job-child").format(record) + "\n")
    sys.stderr.flush()
