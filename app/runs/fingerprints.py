"""Error fingerprints: which dead letters failed "the same way".

A fingerprint is the exception class, its message with the parts that vary between runs
replaced by placeholders (quoted values, times, generated ids of every kind), and the top
frame of the traceback (the innermost `File "...", line N, in fn`, without its line
number, so an edit elsewhere in the file does not split a group). It is computed once, in
Python, when an attempt fails (`app.runs.transitions.finish_many`) and stored on the run, so
grouping a million runs is an index scan, never a regular expression over every error text.

    >>> fingerprint_of("KeyError: 'user 42'", None).message
    'KeyError: <str>'
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

# Order matters: quoted text first (it may hold numbers), then times, then ids.
_UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
_LONG_HEX = r"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}\b"
_TIME = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?"
# A generated id, whatever its kind, is one placeholder: numbers, hex, UUIDs, and words
# holding digits (`order_9f8e7d`, `user-12345`). Short names with a version number
# (`utf8`, `sha256`, `api2`) stay as they are.
_ID_WORD = r"(?<![\w.])(?![A-Za-z]{1,5}\d{1,3}(?![\w-]))[A-Za-z_-]*\d[\w-]*(?:\.\d+)?"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"'[^'\n]*'|\"[^\"\n]*\""), "<str>"),
    (re.compile(_TIME), "<time>"),
    (re.compile(_UUID), "<id>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<id>"),
    (re.compile(_LONG_HEX), "<id>"),
    (re.compile(_ID_WORD), "<id>"),
)
_FRAME = re.compile(r'^\s*File "([^"]*)", line \d+, in (.+)$', re.MULTILINE)
_CLASS = re.compile(r"^([A-Za-z_][\w.]*):")
MAX_MESSAGE_CHARS = 300
LEASE_EXPIRED_ERROR = "lease expired: the worker stopped heartbeating"
QUARANTINED_ERROR = "quarantined: the process running it died too many times"
CRASHED_ERROR = "crashed in a process of its own"
SNOOZED_TOO_OFTEN_ERROR = "snoozed more times than allowed"


@dataclass(frozen=True, slots=True)
class Fingerprint:
    key: str  # 16 hex characters, what runs are grouped by
    exception: str  # the class name, or "" when the error names none
    message: str  # the normalised first line
    frame: str  # `file:function` of the innermost frame, or ""


def normalise(message: str) -> str:
    """The first line of an error with its variable parts replaced by placeholders."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    for pattern, placeholder in _PATTERNS:
        first = pattern.sub(placeholder, first)
    return " ".join(first.split())[:MAX_MESSAGE_CHARS]


def top_frame(traceback: str | None) -> str:
    """`path/to/file.py:function` of the innermost frame of a Python traceback."""
    frames = _FRAME.findall(traceback or "")
    if not frames:
        return ""
    path, function = frames[-1]
    return f"{path}:{function.strip()}"


def exception_class(error: str) -> str:
    match = _CLASS.match(error.strip())
    return match[1] if match else ""


def fingerprint_of(error: str | None, traceback: str | None) -> Fingerprint:
    """The fingerprint of one failed attempt's error text and traceback."""
    text = error or ""
    if text.startswith("lease expired:"):
        text = LEASE_EXPIRED_ERROR  # the worker's name and attempt differ every time
    elif text.startswith("quarantined after "):
        text = QUARANTINED_ERROR
    elif text.startswith(CRASHED_ERROR):
        text = CRASHED_ERROR  # the crash counts differ every time
    message = normalise(text)
    frame = top_frame(traceback)
    exception = exception_class(text)
    digest = hashlib.sha256(f"{exception}\x1f{message}\x1f{frame}".encode()).hexdigest()
    return Fingerprint(digest[:16], exception, message, frame)


LEASE_EXPIRED = fingerprint_of(LEASE_EXPIRED_ERROR, None).key
QUARANTINED = fingerprint_of(QUARANTINED_ERROR, None).key
CRASHED = fingerprint_of(CRASHED_ERROR, None).key
SNOOZED_TOO_OFTEN = fingerprint_of(SNOOZED_TOO_OFTEN_ERROR, None).key
