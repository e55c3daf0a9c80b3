"""Argument checks for built-in handlers: bad arguments fail the run without retries."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from app.handlers.jobs import NonRetryableError


def number(name: str, value: Any, *, minimum: float = 0.0, allow_none: bool = False) -> float:
    """`value` as a finite float >= `minimum`; bool is refused (it is an int in Python)."""
    if value is None and allow_none:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise NonRetryableError(f"argument {name!r} must be a number, got {value!r}")
    if value < minimum:
        raise NonRetryableError(f"argument {name!r} must be at least {minimum:g}, got {value!r}")
    return float(value)


def string_map(name: str, value: Any) -> dict[str, str]:
    """`value` as a dict of strings to strings (`None` is an empty dict)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise NonRetryableError(f"argument {name!r} must map strings to strings, got {value!r}")
    return dict(value)


def string_list(name: str, value: Any) -> list[str]:
    """`value` as a list of strings (`None` is an empty list)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise NonRetryableError(f"argument {name!r} must be a list of strings, got {value!r}")
    return list(value)


def optional_string(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise NonRetryableError(f"argument {name!r} must be a string, got {value!r}")
    return value
