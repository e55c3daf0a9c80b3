"""Run one handler to completion in the calling thread (a pool thread or a job child)."""

from __future__ import annotations

import asyncio
from typing import Any

from app.executors.outcomes import completed, from_exception
from app.handlers.jobs import JobContext, Outcome
from app.handlers.registry import RegisteredHandler


def invoke(entry: RegisteredHandler, ctx: JobContext, args: dict[str, Any]) -> Outcome:
    """Call the handler and describe how it ended; never raises.

    An `async def` handler gets an event loop of its own in this thread. Every exception
    is caught, `BaseException` too: a handler calling `sys.exit()` or raising
    `KeyboardInterrupt` fails its attempt instead of ending a child or a pool thread.
    """
    try:
        if entry.is_async:
            result = asyncio.run(entry.fn(ctx, **args))
        else:
            result = entry.fn(ctx, **args)
    except BaseException as exc:
        return from_exception(exc, entry, args)
    return completed(entry, result)
