"""Whether this process is a job child that executors kill as a whole process group.

Executors run `process` and `subprocess` jobs in children that lead their own process
group and stop them with `killpg`. A command a handler starts there should stay in that
group so the kill takes it along; started from the worker process itself, it needs a group
of its own so it can be killed without killing the worker.
"""

from __future__ import annotations

import os

_job_child = False


def become_job_child() -> None:
    """Lead a new session (unless this process already leads its group) and remember it."""
    global _job_child
    if os.getpgrp() != os.getpid():
        os.setsid()
    _job_child = True


def is_job_child() -> bool:
    return _job_child
