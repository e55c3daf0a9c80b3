"""Turning what happened to an attempt into an `Outcome`: errors, stops, deaths, results."""

from __future__ import annotations

import inspect
import json
import signal
import traceback
from typing import Any

from app.handlers.registry import RegisteredHandler, UnknownHandler
from app.jobs import NonRetryableError, Outcome, OutcomeStatus

MAX_ERROR_CHARS = 2_000
MAX_TRACEBACK_CHARS = 20_000  # the end of a traceback is the useful part

COMPLETED_WITHOUT_RESULT = Outcome.completed(None)  # frozen, so shared by every such run


def failed(error: str, *, traceback_text: str | None = None, retryable: bool = True) -> Outcome:
    return Outcome(
        OutcomeStatus.FAILED,
        error=error[:MAX_ERROR_CHARS],
        traceback=traceback_text[-MAX_TRACEBACK_CHARS:] if traceback_text else None,
        retryable=retryable,
    )


def from_exception(exc: BaseException, entry: RegisteredHandler, args: dict[str, Any]) -> Outcome:
    """FAILED, with the traceback; retryable unless the error says the run can never work."""
    retryable = not isinstance(exc, NonRetryableError | UnknownHandler)
    error = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, TypeError) and not _accepts(entry, args):
        # Arguments the function cannot take fail the same way on every attempt.
        retryable = False
        error = f"handler {entry.name!r} does not accept arguments {sorted(args)}: {exc}"
    return failed(
        error, traceback_text="".join(traceback.format_exception(exc)), retryable=retryable
    )


def _accepts(entry: RegisteredHandler, args: dict[str, Any]) -> bool:
    """Whether `entry.fn(ctx, **args)` binds; looked at only after a TypeError."""
    try:
        inspect.signature(entry.fn).bind(None, **args)
    except TypeError:
        return False
    except ValueError:  # no signature to inspect (some builtins): assume it binds
        return True
    return True


def unknown_handler(exc: UnknownHandler) -> Outcome:
    return failed(str(exc), retryable=False)


def completed(entry: RegisteredHandler, result: Any) -> Outcome:
    """COMPLETED with `result`, or FAILED (not retryable) if it cannot be stored as JSON."""
    if result is None:
        return COMPLETED_WITHOUT_RESULT
    kind = type(result)
    if kind is not str and kind is not int and kind is not bool:
        try:
            json.dumps(result, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return not_json(entry.name, exc)
    return Outcome.completed(result)


def not_json(name: str, exc: BaseException) -> Outcome:
    return failed(
        f"handler {name!r} returned a value that cannot be stored as JSON: "
        f"{type(exc).__name__}: {exc}",
        retryable=False,
    )


def stopped(status: OutcomeStatus, timeout_seconds: float) -> Outcome:
    """TIMED_OUT or CANCELLED; the attempt's own result, if any, is dropped."""
    if status is OutcomeStatus.TIMED_OUT:
        return Outcome(status, error=f"the job ran longer than its timeout of {timeout_seconds:g}s")
    return Outcome(status, error="the job was stopped: cancelled, lease lost or worker stopping")


def describe_exit(returncode: int | None) -> str:
    """`signal SIGSEGV` for a negative return code, else `exit code N`."""
    if returncode is None:
        return "unknown exit status"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def process_died(returncode: int | None) -> Outcome:
    """A job process that ended without answering: retryable, the next attempt may pass."""
    return failed(f"worker process died ({describe_exit(returncode)}) while running the job")
