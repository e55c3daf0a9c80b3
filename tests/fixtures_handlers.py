"""Handlers for the executor tests; children import them via `handler_modules`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import app.handlers.chaos  # noqa: F401  (registers `crash`, for the fault tests)
from app.handlers import handler
from app.jobs import JobContext, NonRetryableError

MODULE = __name__


def _context(ctx: JobContext) -> dict[str, Any]:
    return {
        "run_id": ctx.run_id,
        "attempt": ctx.attempt,
        "idempotency_key": ctx.idempotency_key,
        "fire_time": ctx.fire_time.isoformat() if ctx.fire_time else None,
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
    }


@handler("fixture_echo")
async def echo(ctx: JobContext, **args: Any) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"args": args, **_context(ctx)}


@handler("fixture_sync_echo")
def sync_echo(ctx: JobContext, **args: Any) -> dict[str, Any]:
    return {"args": args, **_context(ctx)}


@handler("fixture_fail")
def fail_deep(ctx: JobContext, message: str = "deep failure") -> None:
    def inner() -> None:
        raise ValueError(message)

    inner()


@handler("fixture_nonretryable")
async def nonretryable(ctx: JobContext) -> None:
    raise NonRetryableError("this run can never succeed")


@handler("fixture_not_json")
def not_json(ctx: JobContext) -> Any:
    return {"a set": {1, 2}}


@handler("fixture_swallow_cancel")
async def swallow_cancel(ctx: JobContext, seconds: float = 5.0) -> str:
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        return "swallowed"
    return "slept"


@handler("fixture_ignore_cancel")
def ignore_cancel(ctx: JobContext, seconds: float) -> str:
    """Blocks without looking at the cancel flag: a thread job that cannot be stopped."""
    time.sleep(seconds)
    return "finally done"


@handler("fixture_write_pids")
def write_pids(ctx: JobContext, path: str, seconds: float = 30.0) -> None:
    """Write this process's pid and a grandchild's pid to `path`, then wait."""
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    Path(path).write_text(f"{os.getpid()} {grandchild.pid}")
    time.sleep(seconds)


@handler("fixture_exit")
def exit_now(ctx: JobContext, code: int = 3) -> None:
    os._exit(code)


@handler("fixture_print")
def print_a_lot(ctx: JobContext) -> str:
    print("handler output that must not corrupt the reply")
    sys.stdout.write("{not json\n")
    return "printed"


@handler("fixture_big")
def big(ctx: JobContext, size: int) -> str:
    return "x" * size


@handler("fixture_pid_then_sleep")
def pid_then_sleep(ctx: JobContext, path: str, seconds: float) -> str:
    Path(path).write_text(str(os.getpid()))
    time.sleep(seconds)
    return "survived"


@handler("fixture_read_stdin")
def read_stdin(ctx: JobContext) -> str:
    return sys.stdin.read()
