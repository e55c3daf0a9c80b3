"""What people and handlers wrote is printed with its control characters escaped."""

import logging
import sys

from app.core.logs import JsonFormatter, TextFormatter
from app.core.text import safe, safe_lines


def test_safe_escapes_every_control_character_and_keeps_the_rest() -> None:
    assert safe("nightly report") == "nightly report"
    assert safe("café ✓ 東京") == "café ✓ 東京"
    assert safe("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert safe("csi\x9b2J") == "csi\\x9b2J"  # the one-byte C1 form of ESC [
    assert safe("line\nbreak\ttab\rreturn\x07bell") == "line\\nbreak\\ttab\\rreturn\\x07bell"
    assert safe("right\u202eto left") == "right\\u202eto left"
    assert safe(42) == "42"


def test_safe_lines_keeps_line_breaks_only() -> None:
    assert safe_lines("first\x1b[H\nsecond\r") == "first\\x1b[H\nsecond\\r"


def _record(msg: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom\x1b[2J")
        except ValueError:
            exc_info = sys.exc_info()
    record = logging.LogRecord("t", logging.ERROR, __file__, 1, msg, args, exc_info)
    record.handler = "evil\x1b]0;title\x07"
    return record


def test_text_log_lines_escape_messages_context_and_tracebacks() -> None:
    line = TextFormatter("worker").format(_record("run failed: %s", "err\x1b[2J", exc=True))
    assert "\x1b" not in line and "\x07" not in line
    assert "run failed: err\\x1b[2J" in line
    assert "handler=evil\\x1b]0;title\\x07" in line
    assert "\nValueError: boom\\x1b[2J" in line  # the traceback keeps its lines


def test_json_log_lines_are_escaped_by_the_encoding() -> None:
    line = JsonFormatter("worker").format(_record("run failed: %s", "err\x1b[2J\x9b"))
    assert "\x1b" not in line and "\x9b" not in line
    assert "\\u001b[2J" in line
