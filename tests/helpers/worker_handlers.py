"""Handlers the worker tests load with SUNDIAL_HANDLERS=tests.helpers.worker_handlers."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from typing import Any

from pydantic import BaseModel, Field

import app.handlers.chaos  # noqa: F401  (registers `crash`, for the fault tests)
from app.handlers import handler
from app.handlers.jobs import JobContext


@handler("busy")
def busy(ctx: JobContext, seconds: float) -> dict[str, Any]:
    """Pure-Python CPU work that holds the GIL for `seconds`."""
    deadline = time.monotonic() + seconds
    spins = 0
    while time.monotonic() < deadline:
        spins += sum(i * i for i in range(1000)) > 0
    return {"spins": spins, "attempt": ctx.attempt}


@handler("span")
async def span(ctx: JobContext, seconds: float, **_key: Any) -> dict[str, float]:
    """Sleep `seconds`; the result is when the handler itself began and ended (unix time):
    how many ran at once, told apart from when their claims and finishes were recorded."""
    began = time.time()
    await asyncio.sleep(seconds)
    return {"began": began, "ended": time.time()}


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


_chatty_log = logging.getLogger("tests.chatty")


def _chat(ctx: JobContext, lines: int, flood: int) -> None:
    for i in range(lines):
        _chatty_log.info("working on line %d of run %d", i, ctx.run_id)
        print(f"printed {i}")
        print(f"complained {i}", file=sys.stderr)
    if flood:
        for _ in range(flood // 100):
            print("y" * 99)


@handler("chatty")
def chatty(ctx: JobContext, lines: int = 3, flood: int = 0, wait_file: str = "") -> int:
    """Logs, prints and complains `lines` times (then `flood` bytes more); with
    `wait_file`, logs once and then waits until that file exists (a test's signal)."""
    if wait_file:
        _chatty_log.info("started, waiting for the go-ahead")
        while not os.path.exists(wait_file):
            time.sleep(0.02)
    _chat(ctx, lines, flood)
    return lines


@handler("chatty_async")
async def chatty_async(ctx: JobContext, lines: int = 3, flood: int = 0) -> int:
    _chat(ctx, lines, flood)
    await asyncio.sleep(0)
    return lines


@handler("dribble")
def dribble(ctx: JobContext, chars: int) -> int:
    """Writes `chars` characters to stdout one at a time and no line end, as `json.dump`
    to stdout writes a large document piece by piece."""
    for _ in range(chars):
        sys.stdout.write("x")
    return chars


@handler("binary_output")
def binary_output(ctx: JobContext) -> str:
    """Bytes to stdout that are not all UTF-8, as a command-line tool's code might write."""
    sys.stdout.buffer.write(b"caf\xc3\xa9 \xff\x00\n")
    sys.stdout.buffer.flush()
    return "written"


class ReportArgs(BaseModel):
    """Arguments `send_report_args` declares: the job form shows a field for each."""

    email: str = Field(description="Who gets the report")
    retries: int = 3


@handler("send_report_args", args=ReportArgs)
def send_report_args(ctx: JobContext, email: str, retries: int = 3) -> dict[str, Any]:
    return {"email": email, "retries": retries}


@handler("snooze_first")
def snooze_first(ctx: JobContext, seconds: float, reason: str) -> dict[str, Any]:
    """Snoozes its first attempt; the next one completes, saying which attempt it was."""
    if ctx.attempt == 1:
        ctx.snooze(seconds, reason)
    return {"attempt": ctx.attempt}


@handler("report_progress")
def report_progress(ctx: JobContext, go_on: str, reports: int = 200) -> str:
    """Reports progress many times (the worker keeps the latest), then waits, at 50 %, until
    the file `go_on` exists (at most 30 s), reports 100 % and returns."""
    for i in range(reports + 1):
        ctx.progress(50 * i / reports, f"step {i} of {reports}")
    deadline = time.monotonic() + 30
    while not os.path.exists(go_on) and time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.02)
    ctx.progress(100, "done")
    return "done"


@handler("call_dependency")
def call_dependency(ctx: JobContext, down_file: str) -> str:
    """Calls a pretend service that answers 503 while `down_file` exists."""
    if os.path.exists(down_file):
        raise RuntimeError("payments-api answered 503 Service Unavailable")
    return "charged"
