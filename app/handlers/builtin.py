"""Handlers every worker has: `noop`, `sleep`, `fail`, `http` and `shell`.

`noop`, `sleep` and `fail` are harmless, for demos, benchmarks and tests; `http` calls a
webhook on a public address (see `app.handlers.webhook`); `shell` runs a command and is
off until an admin enables it for the fleet (see `app.handlers.gate`). `crash`, which
kills its process, lives in `app.handlers.chaos` and is loaded only on request.
"""

from __future__ import annotations

from typing import Any

from app.handlers.args import number, optional_string
from app.handlers.jobs import JobContext, NonRetryableError
from app.handlers.registry import HandlerFunc, HandlerRegistry
from app.handlers.shell import run_command
from app.handlers.webhook import call_url

DEFAULT_FAIL_MESSAGE = "the fail handler always fails"


async def noop(ctx: JobContext, **_ignored: Any) -> None:
    """Do nothing. Throughput benchmarks run it, so it must stay this cheap."""
    return None


async def sleep(ctx: JobContext, seconds: Any = 1.0) -> None:
    """Sleep `seconds`, stopping as soon as the run is cancelled or times out.

    It waits on the cancel flag itself rather than looking at it now and then: under the
    thread model it runs on an event loop of its own in the job's thread, where only the
    flag can stop it; under the async model the task is cancelled too.
    """
    duration = number("seconds", seconds)
    if duration > 0 and await ctx.wait_cancelled(duration):
        ctx.check_cancelled()  # raises Cancelled


async def fail(ctx: JobContext, message: Any = None, retryable: Any = True) -> None:
    """Always fail: with a retryable RuntimeError, or NonRetryableError if `retryable`
    is false."""
    text = optional_string("message", message) or DEFAULT_FAIL_MESSAGE
    if not isinstance(retryable, bool):
        raise NonRetryableError(f"argument 'retryable' must be true or false, got {retryable!r}")
    raise RuntimeError(text) if retryable else NonRetryableError(text)


BUILTINS: dict[str, HandlerFunc] = {
    "noop": noop,
    "sleep": sleep,
    "fail": fail,
    "http": call_url,
    "shell": run_command,
}


def register_builtins(registry: HandlerRegistry) -> None:
    for name, fn in BUILTINS.items():
        registry.register(name, fn)
