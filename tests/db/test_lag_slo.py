"""Lag SLO against a real database and the real trigger: the breakdown by stage, the
alert when a fire starts later than the threshold, and the dead man's switch when
expected fires produced no run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from app.handlers.jobs import Outcome
from app.observability import lag_slo
from app.observability.lag_slo import SloError
from app.runs import transitions
from app.runs.transitions import Finish
from app.services.trigger import Trigger
from tests.helpers.schedules import add, settings
from tests.helpers.waits import db_now

Conn = psycopg.Connection[dict[str, Any]]
MINUTE = timedelta(minutes=1)


def test_lag_breakdown_threshold_alert_and_missing_fires(conn: Conn) -> None:
    start = db_now(conn)
    add(conn, "every minute", now=start, cron="* * * * *")
    lag_slo.set_threshold(conn, "every minute", 60, actor="alice")
    first = start.replace(second=0, microsecond=0) + MINUTE
    fires = [first + i * MINUTE for i in range(7)]
    trigger = Trigger(settings(), holder="t")
    waits = {0: 5, 1: 5, 2: 90}
    for i in (0, 1, 2, 6):  # the trigger is down for fires 3 to 5
        trigger.run_once(conn, now=fires[i] + timedelta(seconds=1))
        if i in waits:
            (job,) = transitions.claim(conn, "w", 1, 30, now=fires[i] + timedelta(seconds=waits[i]))
            done = fires[i] + timedelta(seconds=waits[i] + 2)
            transitions.finish_many(
                conn, "w", [Finish(job.run_id, job.attempt, Outcome.completed())], now=done
            )
    now = fires[6] + timedelta(seconds=100)
    report = lag_slo.report(conn, now=now)
    (lag,) = report.schedules
    assert (lag.name, lag.threshold, lag.fires, lag.breaches) == ("every minute", 60, 4, 2)
    assert lag.breached and lag.latest_fire == fires[6] and round(lag.latest_lag or 0) == 100
    stages = {s.label: s for s in lag.stages}
    assert round(stages["fire → enqueue"].p50 or 0) == 1
    assert round(stages["enqueue → claim"].p50 or 0) == 4
    assert stages["claim → start"].p95 == 0  # no retries
    assert round(stages["start → finish"].p50 or 0) == 2
    assert lag.missing == fires[3:6]
    kinds = [(a.kind, a.at) for a in report.alerts]
    assert kinds == [("lag", fires[6])] + [("missing", f) for f in fires[3:6]]
    # later, with the trigger silent: the next fire is overdue for every schedule
    silent = lag_slo.report(conn, now=fires[6] + timedelta(minutes=5))
    assert ("missing", fires[6] + MINUTE) in [(a.kind, a.at) for a in silent.alerts]


def test_the_threshold_is_checked_audited_and_can_be_cleared(conn: Conn) -> None:
    add(conn, "nightly", cron="0 2 * * *")
    with pytest.raises(SloError, match="no schedule"):
        lag_slo.set_threshold(conn, "nope", 60, actor="bob")
    with pytest.raises(SloError):
        lag_slo.set_threshold(conn, "nightly", 0, actor="bob")
    lag_slo.set_threshold(conn, "nightly", 300, actor="bob")
    assert [s.name for s in lag_slo.report(conn).schedules] == ["nightly"]
    lag_slo.set_threshold(conn, "nightly", None, actor="bob")
    assert lag_slo.report(conn).schedules == []
    details = [
        r["details"]
        for r in conn.execute(
            "SELECT details FROM audit_log WHERE action = 'schedule.lag_slo' ORDER BY id"
        ).fetchall()
    ]
    assert details == [
        {"before": {"lag_slo_seconds": None}, "after": {"lag_slo_seconds": 300}},
        {"before": {"lag_slo_seconds": 300}, "after": {"lag_slo_seconds": None}},
    ]
