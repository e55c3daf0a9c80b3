"""Handlers for tests/db/test_json_logs.py (SUNDIAL_HANDLERS=tests.helpers.json_log_handlers)."""

from __future__ import annotations

import threading

from app.handlers import handler
from app.handlers.jobs import JobContext


@handler("thread_raises")
def thread_raises(ctx: JobContext) -> str:
    """A handler whose helper thread dies of an exception nobody catches: Python reports
    it on stderr, outside the run's own log."""
    thread = threading.Thread(target=_fail, name="helper")
    thread.start()
    thread.join()
    return "done"


def _fail() -> None:
    raise RuntimeError("the helper thread failed")
