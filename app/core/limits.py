"""The ranges Sundial supports, checked in one place for every door (CLI, Python client,
the state module, schedules, workflows, the web and the API).

Input outside them is refused with a `LimitError` (a `UsageError`) whose message names the
range, before anything is written. Migration 0006 holds the same ranges as CHECK
constraints, so a row written around Sundial cannot carry a value that a process cannot
load or compute with.

    check_instant("--at", moment)        # 1970-01-01 <= moment < 2200-01-01 (UTC)
    check_args("args", {"invoice": 42})  # a JSON object PostgreSQL and Python both accept
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from app.core.errors import UsageError

# Instants a person may ask for (run at, schedule start and end, pause until). A schedule
# stops firing at LATEST.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)  # exclusive
# What the database accepts in a timestamp column: wider than the input range, so a delay,
# a spread or a lease added to an accepted instant always fits, and narrow enough that
# every process can load it (Python's datetime stops at years 1 and 9999).
STORED_EARLIEST = "1900-01-01 00:00:00+00"
STORED_LATEST = "2300-01-01 00:00:00+00"

MAX_PRIORITY = 32767  # priorities run from -MAX_PRIORITY to MAX_PRIORITY; aging stops there
MAX_DURATION_SECONDS = 10 * 365 * 86400  # timeout, delay, interval, spread, catch-up window
MAX_RETRIES = 1000
# A run's defaults, where nothing else sets them (app.runs.run_fields declares them too)
DEFAULT_PRIORITY = 1
DEFAULT_TIMEOUT_SECONDS = 300
DEFAULT_MAX_RETRIES = 3
DEFAULT_QUEUE = "default"
DEFAULT_MAX_CRASHES = 3  # a run whose own process died under it this often is quarantined
MAX_CRASHES = 100
# A worker killed from outside is no evidence against the runs it held; but a run whose
# workers died under it this many times its crash budget is quarantined all the same.
WORKER_DEATHS_PER_CRASH = 10
MAX_COUNT = 1_000_000  # catch-up limit, auto-pause after
MAX_RUN_ID = 2**63 - 1  # run ids are bigint
MAX_FIRES_SHOWN = 10_000
MAX_BACKFILL_FIRES = 10_000  # most fires one backfill runs
MAX_BACKFILL_CONCURRENCY = 50  # most runs of one backfill at once
MAX_NOTIFY_PER_MINUTE = 600  # most messages one notification channel sends a minute
MAX_DEPENDENCIES = 20  # services a job definition names as called by its runs

MAX_NAME_LENGTH = 200  # schedules, jobs, workflows, handlers, DAG steps
MAX_KEY_LENGTH = 1000  # idempotency keys
MAX_TEXT_LENGTH = 10_000  # descriptions, pause notes, cron expressions
MAX_ARGS_BYTES = 256 * 1024  # args as JSON
MAX_ARGS_DEPTH = 32  # nesting of objects and lists in args
ARGS_INT_RANGE = (-(2**63), 2**63 - 1)  # whole numbers in args
# Other numbers in args: beyond 2**53 a float is read back as a different whole number.
ARGS_FLOAT_MAX = float(2**53)
# From inside a job (JobContext.snooze and .progress): a snooze puts the run back for at most
# 30 days, and a run that snoozes more than MAX_SNOOZES times fails, so none waits unseen for
# ever; a progress figure is a finite number within ±2^53, its message one short line.
MAX_SNOOZE_SECONDS = 30 * 86400
MAX_SNOOZES = 1000
MAX_SNOOZE_REASON_LENGTH = 500
MAX_PROGRESS_MESSAGE_LENGTH = 200


class LimitError(UsageError):
    """A value lies outside the range Sundial supports; the message gives the range."""


@contextmanager
def refused_as(error: type[UsageError]) -> Iterator[None]:
    """Raise a LimitError inside as the caller's own kind of error, with its message."""
    try:
        yield
    except LimitError as exc:
        raise error(str(exc), exc.field) from None


def check_whole(label: str, value: Any, low: int, high: int) -> int:
    """`value` as a whole number in [low, high]."""
    if type(value) is int and low <= value <= high:  # the common case, fast (bulk submits)
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitError(f"{label} must be a whole number, got {_show(value)}")
    if not low <= value <= high:
        raise LimitError(f"{label} must be between {low:,} and {high:,}, got {_show(value)}")
    return value


def check_seconds(label: str, value: Any, low: float, high: float = MAX_DURATION_SECONDS) -> float:
    """`value` as a finite number of seconds in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LimitError(f"{label} must be a number of seconds, got {_show(value)}")
    if not math.isfinite(value) or not low <= value <= high:
        raise LimitError(
            f"{label} must be between {low:,g} and {high:,} seconds, got {_show(value)}"
        )
    return float(value)


def check_instant(label: str, value: Any) -> datetime:
    """`value` as a time-zone-aware instant within [EARLIEST, LATEST)."""
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise LimitError(f"{label} needs a time with a time zone (e.g. 2030-01-01T09:00Z)")
    try:
        inside = EARLIEST <= value < LATEST
    except OverflowError:  # year 1 in a zone east of UTC lies before year 1 in UTC
        inside = False
    if not inside:
        raise LimitError(
            f"{label} must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC), "
            f"got {value.isoformat()}"
        )
    return value


# What no name may hold: C0 and C1 control characters (line breaks and tabs included), the
# zero-width and direction-changing characters, and line and paragraph separators (lone
# surrogates too, refused as text by `check_text`). One rule for every door; the API's
# schema carries it as NAME_PATTERN.
_NAME_REFUSED_CLASS = "\\x00-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u2069\\ufeff"
NAME_PATTERN = f"^[^{_NAME_REFUSED_CLASS}]*[^\\s{_NAME_REFUSED_CLASS}][^{_NAME_REFUSED_CLASS}]*$"
_NAME_REFUSES = re.compile(f"[{_NAME_REFUSED_CLASS}]")


def check_text(label: str, value: Any, max_length: int = MAX_TEXT_LENGTH) -> str:
    """`value` as text PostgreSQL can store: no NUL, valid Unicode, not too long."""
    if plain_text(value, max_length):
        return str(value)
    if not isinstance(value, str):
        raise LimitError(f"{label} must be text, got {_show(value)}")
    if len(value) > max_length:
        raise LimitError(f"{label} may have at most {max_length:,} characters")
    if "\x00" in value:
        raise LimitError(f"{label} cannot contain a NUL character (\\u0000)")
    if not _encodable(value):
        raise LimitError(f"{label} is not valid Unicode (it has a lone surrogate)")
    return value


def check_name(label: str, value: Any, max_length: int = MAX_NAME_LENGTH) -> str:
    """A name (of a job, schedule, workflow, step, calendar, handler, ...): 1 to
    `max_length` characters of storable text, not all blank, without control characters,
    line breaks or the invisible characters that change how text around them reads."""
    check_text(label, value, max_length)
    if not value.strip():
        raise LimitError(f"{label} cannot be empty")
    if _NAME_REFUSES.search(value):
        raise LimitError(
            f"{label} cannot contain control characters, line breaks or invisible "
            f"formatting characters, got {value!r}"
        )
    return str(value)


def plain_name(value: Any) -> bool:
    """`check_name` would accept `value`, told at a glance for short ASCII names."""
    return plain_text(value, MAX_NAME_LENGTH) and value.isprintable() and bool(value.strip())


def whole_id(text: str) -> int | None:
    """Text from an address, query string or form as an id (a bigint): ASCII digits only,
    within 0..MAX_RUN_ID; None for anything else, which then names nothing."""
    if text.isascii() and text.isdigit() and len(text) <= 19 and int(text) <= MAX_RUN_ID:
        return int(text)
    return None


def check_run_id(label: str, value: Any) -> int:
    return check_whole(label, value, 1, MAX_RUN_ID)


def check_args(label: str, value: Any) -> dict[str, Any]:
    """`value` as a JSON object that round-trips through PostgreSQL's jsonb unchanged:
    text keys, storable strings, finite numbers, 64-bit whole numbers, bounded nesting
    and size."""
    if not isinstance(value, dict):
        raise LimitError(f"{label} must be a JSON object, got {type(value).__name__}")
    if plain_args(value):
        return value
    # An upper bound of its size as JSON, so that only big documents are encoded to measure
    # them (bulk submits check thousands of small ones).
    most_bytes = 2
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # iterative: a deep document cannot hit the recursion limit
        item, depth = stack.pop()
        most_bytes += _ITEM_BYTES
        if isinstance(item, dict | list):
            if depth > MAX_ARGS_DEPTH:
                raise LimitError(f"{label} may nest at most {MAX_ARGS_DEPTH} levels deep")
            if isinstance(item, dict):
                for key in item:
                    if not isinstance(key, str):
                        raise LimitError(f"{label} keys must be text, got {_show(key)}")
                    check_text(f"a key in {label}", key, MAX_ARGS_BYTES)
                    most_bytes += _ITEM_BYTES + _CHAR_BYTES * len(key)
                stack += [(v, depth + 1) for v in item.values()]
            else:
                stack += [(v, depth + 1) for v in item]
        elif isinstance(item, str):
            check_text(f"a string in {label}", item, MAX_ARGS_BYTES)
            most_bytes += _CHAR_BYTES * len(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            low, high = ARGS_INT_RANGE
            if not low <= item <= high:
                raise LimitError(f"whole numbers in {label} must fit in 64 bits")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise LimitError(f"{label} cannot hold NaN or infinity (JSON has neither)")
            if abs(item) >= ARGS_FLOAT_MAX:
                raise LimitError(
                    f"numbers with a fraction or exponent in {label} must lie within ±2**53; "
                    "send larger ones as whole numbers or text"
                )
        else:
            raise LimitError(f"{label} must hold only JSON values, got {type(item).__name__}")
    if most_bytes > MAX_ARGS_BYTES and _json_bytes(value) > MAX_ARGS_BYTES:
        raise LimitError(f"{label} may be at most {MAX_ARGS_BYTES // 1024} KB as JSON")
    return value


def _json_bytes(value: Any) -> int:
    """Its size as PostgreSQL stores it: UTF-8, not escaped."""
    return len(json.dumps(value, ensure_ascii=False).encode())


_ITEM_BYTES = 30  # the most one number, literal, separator or pair of quotes takes
_CHAR_BYTES = 12  # the most one character takes, escaped as a surrogate pair \udXXX\udXXX


_PLAIN_TEXT_MAX = 1000
_PLAIN_INT = (-(2**53), 2**53)


def plain_text(value: Any, max_length: int) -> bool:
    """Short ASCII text without NUL: fine, told apart in constant time (ASCII has no
    surrogates, and CPython knows whether a string is ASCII)."""
    return (
        type(value) is str
        and len(value) <= min(max_length, _PLAIN_TEXT_MAX)
        and value.isascii()
        and "\x00" not in value
    )


def plain_args(args: dict[str, Any]) -> bool:
    """A flat object of short plain text, small whole numbers, booleans and nulls: within
    every limit without a closer look (most args are like this)."""
    low, high = _PLAIN_INT
    for key, item in args.items():
        if not plain_text(key, _PLAIN_TEXT_MAX):
            return False
        kind = type(item)
        if kind is int:
            if not low <= item <= high:
                return False
        elif kind is str:
            if not plain_text(item, _PLAIN_TEXT_MAX):
                return False
        elif not (kind is bool or item is None):
            return False
    return len(args) <= 100  # at most 100 * (1000 + 1000 + 30) bytes: far below the limit


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _show(value: Any) -> str:
    """A value for a message, cut short (a 5,000-digit number is not worth repeating)."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return "a number too long to show"
    return text if len(text) <= 40 else text[:37] + "..."
