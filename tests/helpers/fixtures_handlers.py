"""Handlers for the executor tests; children import them via `handler_modules`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import app.handlers.chaos  # noqa: F401  (registers `crash`, for the fault tests)
from app.handlers import handler
from app.handlers.jobs import JobContext, NonRetryableError

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


@handler("fixture_say_then_sleep")
def say_then_sleep(ctx: JobContext, text: str, seconds: float, then: str = "") -> str:
    print(text)
    time.sleep(seconds)
    if then:
        print(then)
    return "slept"


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


# ---- badly behaved handlers: what they do, by name ------------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


class ExitingMessage(Exception):
    def __str__(self) -> str:
        raise SystemExit("from __str__")


class ExitingDict(dict[str, Any]):
    """JSON-encoding it calls `items()`, which exits."""

    def items(self) -> Any:
        raise SystemExit("from items()")


class NotAnException(BaseException):
    """A `BaseException` subclass a library might raise."""


def _raise(exc: BaseException) -> Any:
    raise exc


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


HOSTILE_RAISES: dict[str, Callable[[], Any]] = {
    "system_exit": lambda: _raise(SystemExit(3)),
    "keyboard_interrupt": lambda: _raise(KeyboardInterrupt()),
    "generator_exit": lambda: _raise(GeneratorExit()),
    "base_exception": lambda: _raise(NotAnException("custom")),
    "cancelled_by_itself": lambda: _raise(asyncio.CancelledError("by the handler")),
    "unprintable_error": lambda: _raise(Unprintable()),
    "message_that_exits": lambda: _raise(ExitingMessage()),
    "nul_error": lambda: _raise(RuntimeError("x\x00y")),
    "surrogate_error": lambda: _raise(RuntimeError("x\ud800y")),
}
HOSTILE_NOT_JSON: dict[str, Callable[[], Any]] = {
    "huge_int": lambda: 10**5000,
    "nan": lambda: float("nan"),
    "infinity_inside": lambda: {"v": [float("inf")]},
    "deeply_nested": lambda: _nested(100_000),
    "result_that_exits": lambda: ExitingDict(a=1),
}
HOSTILE_TEXT: dict[str, Callable[[], Any]] = {
    "nul_result": lambda: "a\x00b",
    "surrogate_result": lambda: {"k\udc80\x00": ["a\x00b", "\ud83d"], "n": 1},
}
HOSTILE = {**HOSTILE_RAISES, **HOSTILE_NOT_JSON, **HOSTILE_TEXT}


async def _raise_in_task(exc: BaseException) -> None:
    raise exc


@handler("fixture_task_raises")
async def task_raises(ctx: JobContext, awaited: bool) -> str:
    """`SystemExit` in a task it awaits, or `KeyboardInterrupt` in one it leaves running:
    asyncio lets both escape from the task into the event loop running it."""
    if awaited:
        await asyncio.gather(_raise_in_task(SystemExit(5)))
    else:
        asyncio.get_running_loop().create_task(_raise_in_task(KeyboardInterrupt()))
        await asyncio.sleep(0.05)
    return "returned"


@handler("fixture_deep_result")
def deep_result(ctx: JobContext, depth: int) -> list[Any]:
    """Nested `depth` lists deep, written out by a job child that raised its own recursion
    limit (run it in a child only: it changes the limit of the process it runs in)."""
    sys.setrecursionlimit(depth + 1_000)
    return _nested(depth)


@handler("fixture_hostile")
async def hostile(ctx: JobContext, kind: str) -> Any:
    return HOSTILE[kind]()


@handler("fixture_sync_hostile")
def sync_hostile(ctx: JobContext, kind: str) -> Any:
    return HOSTILE[kind]()


# What the worker fuzz test asks a handler to do: text with hostile characters put in, then
# returned, raised or exited with; or a result JSON cannot hold.
RECIPE_CHARACTERS = {
    "nul": "\x00",
    "surrogate": "\ud800",
    "low_surrogate": "\udfff",
    "escape": "\x1b[2J",
}


def _follow_recipe(tag: int, action: str, text: str, inject: list[str], poison: str) -> Any:
    hostile_text = f"{tag}:{text}{''.join(RECIPE_CHARACTERS[name] for name in inject)}"
    if action == "raise":
        raise RuntimeError(hostile_text)
    if action == "exit":
        raise SystemExit(hostile_text)
    result: dict[str, Any] = {"tag": tag, "text": hostile_text}
    if poison:
        result["poison"] = HOSTILE_NOT_JSON[poison]()
    return result


@handler("fixture_recipe")
async def recipe(
    ctx: JobContext, tag: int, action: str, text: str, inject: list[str], poison: str
) -> Any:
    return _follow_recipe(tag, action, text, inject, poison)


@handler("fixture_sync_recipe")
def sync_recipe(
    ctx: JobContext, tag: int, action: str, text: str, inject: list[str], poison: str
) -> Any:
    return _follow_recipe(tag, action, text, inject, poison)


@handler("fixture_snooze")
async def snooze(ctx: JobContext, seconds: Any, reason: Any) -> None:
    await asyncio.sleep(0)
    ctx.snooze(seconds, reason)


@handler("fixture_progress")
def progress(ctx: JobContext, reports: int) -> str:
    """Reports `reports` figures in a tight loop, then 100 % "done"."""
    for i in range(reports):
        ctx.progress(i, f"at {i}")
    ctx.progress(100, "done")
    return "reported"
