"""What several commands read: handler args as JSON, a JSON file, the job settings options."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.core import limits
from app.core.errors import UsageError
from app.handlers.execution_models import ExecutionModel


def parse_args_json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not valid JSON: {exc.msg} at position {exc.pos}") from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, 50,000-deep nesting
        raise UsageError(f"--args is beyond what Sundial supports: {_first_line(exc)}") from None
    if not isinstance(value, dict):
        raise UsageError(f"--args must be a JSON object like '{{\"key\": 1}}', got {text!r}")
    return limits.check_args("--args", value)


def whole_number(minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse type: a whole number (ASCII digits) from `minimum` to `maximum`; anything
    else is refused with a sentence and exit code 2 before the command runs."""

    def parse(text: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]{1,20}", text.strip()):
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}")
        value = int(text)
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"must be between {minimum:,} and {maximum:,}, got {value:,}"
            )
        return value

    parse.__name__ = "whole number"  # argparse names the type in some errors
    return parse


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def read_json(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path} is beyond what Sundial supports: {_first_line(exc)}") from None


def add_job_settings_options(p: argparse.ArgumentParser) -> None:
    """What a run or a job definition carries besides its handler and args: one set of
    options and defaults for `submit`, `job add` and `schedule add`."""

    p.add_argument(
        "--priority",
        type=int,
        default=limits.DEFAULT_PRIORITY,
        help=f"higher runs first (default {limits.DEFAULT_PRIORITY})",
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=limits.DEFAULT_TIMEOUT_SECONDS,
        help=f"seconds (default {limits.DEFAULT_TIMEOUT_SECONDS})",
    )
    p.add_argument(
        "--max-retries",
        type=int,
        default=limits.DEFAULT_MAX_RETRIES,
        help=f"retries after the first try (default {limits.DEFAULT_MAX_RETRIES})",
    )
    p.add_argument(
        "--execution-model",
        default=ExecutionModel.ASYNC.value,
        choices=[m.value for m in ExecutionModel],
        help="where the handler runs (default async)",
    )
    p.add_argument(
        "--queue",
        default=limits.DEFAULT_QUEUE,
        help=f"the queue its runs wait in (default {limits.DEFAULT_QUEUE})",
    )
