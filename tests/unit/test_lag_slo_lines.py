"""The lag page's cheaper pieces: expected fires from the per-minute cache equal the
direct walk, and a schedule's missing fires share one alert line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.observability import lag_slo
from app.observability.lag_slo import Alert
from app.scheduling.cron import Recurrence, latest_fires
from app.web.lag_slo import alert_lines

START = datetime(2026, 3, 28, 22, 0, 7, tzinfo=UTC)  # a DST change in Europe/Berlin follows
RULES = [
    Recurrence.from_cron("0 * * * *", "Europe/Berlin"),
    Recurrence.from_cron("*/5 * * * *"),
    Recurrence.from_cron("30 2 * * *", "Europe/Berlin"),
    Recurrence.every(7, START),
    Recurrence.every(0.5, START),
]


@pytest.mark.parametrize("rule", RULES)
def test_cached_expected_fires_equal_the_direct_walk(rule: Recurrence) -> None:
    lag_slo._expected_cache.clear()
    for step in range(0, 26 * 3600, 4321):  # odd seconds: every position within a minute
        until = START + timedelta(seconds=step, microseconds=step % 999_983)
        for since in (until - timedelta(hours=24), until - timedelta(seconds=37)):
            want = [f.at for f in latest_fires(rule, since, until, lag_slo.MISSING_SHOWN)]
            assert lag_slo._expected_fires(rule, since, until) == want, (since, until)
            assert lag_slo._expected_fires(rule, since, until) == want  # from the cache


@pytest.mark.parametrize("rule", RULES)
def test_a_window_sliding_minute_by_minute_is_derived_exactly(rule: Recurrence) -> None:
    """Each minute's entry comes from the minute before's (a walk of one minute only):
    over a day and a DST change, every reading still equals the direct walk."""
    lag_slo._expected_cache.clear()
    for minute in range(0, 26 * 60, 7):
        for second in (0, 31):
            until = START + timedelta(minutes=minute, seconds=second)
            since = until - timedelta(hours=24)
            want = [f.at for f in latest_fires(rule, since, until, lag_slo.MISSING_SHOWN)]
            assert lag_slo._expected_fires(rule, since, until) == want, (since, until)
            # and the next minute, derived from this one
            later = until + timedelta(minutes=1)
            want = [f.at for f in latest_fires(rule, later - timedelta(hours=24), later,
                                               lag_slo.MISSING_SHOWN)]  # fmt: skip
            assert lag_slo._expected_fires(rule, later - timedelta(hours=24), later) == want


def test_a_schedules_missing_fires_share_one_line() -> None:
    at = [START + timedelta(hours=h) for h in range(4)]
    expected = "was expected to fire and that fire produced no run"
    alerts = [
        Alert("lag", "a", "started 90 s after its fire; the threshold is 60 s", at[0]),
        Alert("missing", "b", "was due to fire and has not: is the trigger running?", at[1]),
        *[Alert("missing", "b", expected, t) for t in at],
        Alert("missing", "c", expected, at[2]),
    ]
    lines = alert_lines(alerts)
    assert [(x.kind, x.schedule, len(x.times)) for x in lines] == [
        ("lag", "a", 1), ("missing", "b", 1), ("missing", "b", 2), ("missing", "c", 1),
    ]  # fmt: skip
    assert lines[2].text == "was expected to fire 4 times and those fires produced no run"
    assert lines[2].times == [at[0], at[3]] and lines[3].text == expected
