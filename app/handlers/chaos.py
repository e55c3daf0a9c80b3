"""Handlers that break things on purpose, for tests and fault drills.

None of them is registered by default: a worker has them only when `SUNDIAL_HANDLERS`
names this module (`SUNDIAL_HANDLERS=app.handlers.chaos`), so a submitted run can never
kill a production worker by accident.
"""

from __future__ import annotations

import os
import resource
import signal
from typing import Any

from app.handlers.args import optional_string
from app.handlers.jobs import JobContext, NonRetryableError
from app.handlers.registry import handler

CRASH_SIGNALS = ("KILL", "SEGV")


@handler("crash")
def crash(ctx: JobContext, signal: Any = "KILL") -> None:
    """Kill the process running the job, by SIGKILL or (`signal: "SEGV"`) SIGSEGV.

    Simulates a crash. Under the async and thread models that process is the worker.
    """
    name = optional_string("signal", signal) or "KILL"
    name = name.upper().removeprefix("SIG")
    if name not in CRASH_SIGNALS:
        raise NonRetryableError(
            f"argument 'signal' must be one of {', '.join(CRASH_SIGNALS)}, got {signal!r}"
        )
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a simulated segfault needs no core file
    os.kill(os.getpid(), _signal_named(name))


def _signal_named(name: str) -> int:
    return int(getattr(signal, f"SIG{name}"))
