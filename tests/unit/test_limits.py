"""The checks of app.core.limits, as pure functions."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from app.core import limits
from app.core.errors import UsageError
from app.scheduling.cron import Recurrence, next_fire


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
        datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-12))),
        datetime(1969, 12, 31, 23, 59, tzinfo=UTC),
        limits.LATEST,
    ],
)
def test_instants_outside_the_supported_range_are_refused(moment: datetime) -> None:
    with pytest.raises(limits.LimitError, match="must lie between 1970-01-01 and 2200-01-01"):
        limits.check_instant("--at", moment)


def test_the_ends_of_the_supported_range() -> None:
    assert limits.check_instant("t", limits.EARLIEST) == limits.EARLIEST
    last = limits.LATEST - timedelta(microseconds=1)
    assert limits.check_instant("t", last) == last


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"a": float("nan")}, "NaN or infinity"),
        ({"a": 2**63}, "64 bits"),
        ({"a": 1e16}, "within ±2**53"),
        ({"a": "\x00"}, "NUL"),
        ({"\ud800": 1}, "lone surrogate"),
        ({1: 1}, "keys must be text"),
        ({"a": (1, 2)}, "only JSON values"),
        ({"a": json.loads("[" * 32 + "]" * 32)}, "at most 32 levels"),
        ({"a": "x" * 200_000, "b": "y" * 100_000}, "at most 256 KB"),
        ({f"k{i}": "é" * 5000 for i in range(30)}, "at most 256 KB"),  # 300 KB as UTF-8
    ],
)
def test_args_that_would_not_round_trip_are_refused(args: dict[Any, Any], message: str) -> None:
    with pytest.raises(limits.LimitError, match=re.escape(message)):
        limits.check_args("args", args)


def test_args_within_the_limits_pass_the_fast_and_the_full_check() -> None:
    flat = {"a": 1, "b": "text", "c": None, "d": True}
    nested = {"a": [1.5, {"b": "é"}], "n": -(2**63), "deep": json.loads("[" * 31 + "]" * 31)}
    assert limits.plain_args(flat)
    assert not limits.plain_args(nested)
    assert limits.check_args("args", flat) is flat
    assert limits.check_args("args", nested) is nested
    accented = {f"k{i}": "é" * 2000 for i in range(30)}  # 120 KB as UTF-8, 360 KB escaped
    assert limits.check_args("args", accented) is accented


def test_a_limit_error_is_a_usage_error_and_can_be_raised_as_the_callers_own() -> None:
    class ScheduleError(UsageError):
        pass

    with pytest.raises(ScheduleError, match="priority must be between"):
        with limits.refused_as(ScheduleError):
            limits.check_whole("priority", 40000, -limits.MAX_PRIORITY, limits.MAX_PRIORITY)


def test_a_schedule_has_no_fire_at_or_after_the_latest_supported_time() -> None:
    rule = Recurrence.every(3600, limits.LATEST - timedelta(minutes=90))
    fire = next_fire(rule, limits.LATEST - timedelta(hours=2))
    assert fire is not None and fire.at == limits.LATEST - timedelta(minutes=90)
    assert next_fire(rule, fire.at) is not None  # 30 minutes before the end
    last = next_fire(rule, fire.at)
    assert last is not None and next_fire(rule, last.at) is None
    assert next_fire(Recurrence.from_cron("0 0 1 1 *"), limits.LATEST) is None
