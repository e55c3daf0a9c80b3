"""Turning what happened to an attempt into an `Outcome`: errors, stops, deaths, results."""

from __future__ import annotations

import inspect
import json
import re
import signal
import traceback
from dataclasses import replace
from typing import Any

from app.handlers.jobs import NonRetryableError, Outcome, OutcomeStatus, Snooze
from app.handlers.registry import RegisteredHandler, UnknownHandler

MAX_ERROR_CHARS = 2_000
MAX_TRACEBACK_CHARS = 20_000  # the end of a traceback is the useful part

COMPLETED_WITHOUT_RESULT = Outcome.completed(None)  # frozen, so shared by every such run

# PostgreSQL text and jsonb cannot hold NUL, and UTF-8 cannot encode a lone surrogate.
_UNSTORABLE_CHARS = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT_CHAR = "\ufffd"


def failed(
    error: str, *, traceback_text: str | None = None, retryable: bool = True, crashed: bool = False
) -> Outcome:
    return Outcome(
        OutcomeStatus.FAILED,
        error=error[:MAX_ERROR_CHARS],
        traceback=traceback_text[-MAX_TRACEBACK_CHARS:] if traceback_text else None,
        retryable=retryable,
        crashed=crashed,
    )


def from_exception(exc: BaseException, entry: RegisteredHandler, args: dict[str, Any]) -> Outcome:
    """FAILED, with the traceback; retryable unless the error says the run can never work.

    Any `BaseException` a handler raises (`SystemExit`, `KeyboardInterrupt`, ...) is an
    error of that attempt like any other; `Snooze` (from `ctx.snooze`) is no error: SNOOZED.
    """
    if isinstance(exc, Snooze):
        return Outcome.snoozed(exc)
    retryable = not isinstance(exc, NonRetryableError | UnknownHandler)
    message = _message(exc)
    error = f"{type(exc).__name__}: {message}"
    if isinstance(exc, TypeError) and not _accepts(entry, args):
        # Arguments the function cannot take fail the same way on every attempt.
        retryable = False
        error = f"handler {entry.name!r} does not accept arguments {sorted(args)}: {message}"
    return failed(error, traceback_text=_traceback(exc), retryable=retryable)


def _message(exc: BaseException) -> str:
    """`str(exc)`, which is the handler's code and may itself raise (anything)."""
    try:
        return str(exc)
    except BaseException as broken:
        return f"<the exception's message could not be read: {type(broken).__name__}>"


def _traceback(exc: BaseException) -> str | None:
    try:
        return "".join(traceback.format_exception(exc))
    except BaseException:  # the message raised: the frames, then the type alone
        try:
            frames = "".join(traceback.format_tb(exc.__traceback__))
        except BaseException:
            return None
        return (
            f"Traceback (most recent call last):\n{frames}{type(exc).__name__}: {_message(exc)}\n"
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
    """COMPLETED with `result`, or FAILED (not retryable) if it cannot be stored as JSON:
    not JSON data, NaN or infinity, an integer too long to write out, nesting too deep."""
    if result is None:
        return COMPLETED_WITHOUT_RESULT
    if type(result) is not str and type(result) is not bool:
        try:
            json.dumps(result, allow_nan=False)
        except BaseException as exc:  # TypeError, ValueError, RecursionError, or its own
            return not_json(entry.name, exc)
    return Outcome.completed(result)


def not_json(name: str, exc: BaseException) -> Outcome:
    return failed(
        f"handler {name!r} returned a value that cannot be stored as JSON: "
        f"{type(exc).__name__}: {_message(exc)}",
        retryable=False,
    )


def storable(outcome: Outcome, max_result_bytes: int) -> Outcome:
    """The outcome as the database can store it; the one place the worker prepares it.

    NUL and lone surrogates in the result, error and traceback become U+FFFD; a result
    larger than `max_result_bytes` as JSON, or one that cannot be written out at all,
    makes the attempt FAILED (not retryable) with the reason.
    """
    if outcome.result is None and outcome.error is None and outcome.traceback is None:
        return outcome  # most runs: nothing to look at
    error = _storable_text(outcome.error)
    traceback_text = _storable_text(outcome.traceback)
    if error is not None:
        error = error[:MAX_ERROR_CHARS]
    if traceback_text is not None:
        traceback_text = traceback_text[-MAX_TRACEBACK_CHARS:]
    result = outcome.result
    if result is not None:
        try:
            text = json.dumps(result, separators=(",", ":"), allow_nan=False)
            if "\\u0000" in text or "\\ud" in text:  # NUL or a surrogate, maybe lone
                result = _storable_json(result)
        except BaseException as exc:  # RecursionError, ValueError, or the value's own
            return failed(
                f"the result cannot be stored as JSON: {type(exc).__name__}: {_message(exc)}",
                retryable=False,
            )
        size = len(text.encode())
        if size > max_result_bytes:
            return too_big(size, max_result_bytes)
    if result is outcome.result and error is outcome.error and traceback_text is outcome.traceback:
        return outcome
    return replace(outcome, result=result, error=error, traceback=traceback_text, logs=())


def _storable_text(text: str | None) -> str | None:
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return _UNSTORABLE_CHARS.sub(REPLACEMENT_CHAR, text)


def _storable_json(value: Any) -> Any:
    """A copy of JSON data with every string (keys too) made storable."""
    if isinstance(value, str):
        return _storable_text(value)
    if isinstance(value, dict):
        return {
            _storable_text(k) if isinstance(k, str) else k: _storable_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_storable_json(v) for v in value]
    return value


def too_big(size: int, limit: int) -> Outcome:
    return failed(
        f"the handler returned a {size:,}-byte result; results are limited to "
        f"{limit:,} bytes (SUNDIAL_MAX_RESULT_BYTES): store large data elsewhere and "
        "return a reference to it",
        retryable=False,
    )


def unstorable(outcome: Outcome, exc: BaseException) -> Outcome:
    """FAILED in place of an outcome the database refused, saying why (not retried: the
    same outcome would be refused again)."""
    return failed(
        f"the attempt ended {outcome.status.value} but its outcome could not be stored: "
        f"{type(exc).__name__}: {_storable_text(_message(exc))}",
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
    error = f"worker process died ({describe_exit(returncode)}) while running the job"
    return failed(error, crashed=True)
