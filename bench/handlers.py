"""Handlers that benchmarks run in their workers (`SUNDIAL_HANDLERS=bench.handlers`)."""

from __future__ import annotations

import time
from typing import Any

from app.handlers import handler
from app.handlers.jobs import JobContext


@handler("bench-stamp")
async def stamp(ctx: JobContext, **_ignored: Any) -> float:
    """Return the wall-clock time of the handler's first line: the benchmark compares it
    with the time just before the submit call (same machine, same clock)."""
    return time.time()
