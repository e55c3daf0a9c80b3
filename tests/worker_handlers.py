"""Handlers the worker tests load with SUNDIAL_HANDLERS=tests.worker_handlers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import app.handlers.chaos  # noqa: F401  (registers `crash`, for the fault tests)
from app.handlers import handler
from app.jobs import JobContext


@handler("busy")
def busy(ctx: JobContext, seconds: float) -> dict[str, Any]:
    """Pure-Python CPU work that holds the GIL for `seconds`."""
    deadline = time.monotonic() + seconds
    spins = 0
    while time.monotonic() < deadline:
        spins += sum(i * i for i in range(1000)) > 0
    return {"spins": spins, "attempt": ctx.attempt}


@handler("block_loop")
async def block_loop(ctx: JobContext, seconds: float) -> str:
    """An async handler that wrongly blocks the event loop (a sync call inside async)."""
    time.sleep(seconds)  # noqa: ASYNC251  (blocking on purpose)
    return "done"


@handler("echo")
async def echo(ctx: JobContext, **args: Any) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"args": args, "run_id": ctx.run_id, "attempt": ctx.attempt}


@handler("step")
async def step(ctx: JobContext, name: str, sleep: float = 0) -> dict[str, Any]:
    """A DAG step: reports which upstream results it was given."""
    if sleep:
        await asyncio.sleep(sleep)
    return {"name": name, "upstream": ctx.upstream}


@handler("big_result")
async def big_result(ctx: JobContext, size: int) -> str:
    return "x" * size
