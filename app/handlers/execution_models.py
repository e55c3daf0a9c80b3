"""How a handler's runs execute on a worker: the four execution models.

A handler declares one (`@handler(..., model=...)`), a job definition or a submit may
choose another; `app.executors.router` hands each run to the executor of its model.
"""

from __future__ import annotations

from enum import StrEnum


class ExecutionModel(StrEnum):
    ASYNC = "async"
    """Awaited on the worker's event loop: I/O written with `await`."""

    THREAD = "thread"
    """A thread pool: blocking I/O libraries. Cannot be killed, only asked to stop."""

    PROCESS = "process"
    """A process pool: CPU-bound Python, one GIL per process."""

    SUBPROCESS = "subprocess"
    """A fresh child process per run: killable, isolated; long or untrusted work."""
