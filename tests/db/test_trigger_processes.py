"""Real `sundial trigger` processes against one database: several at once fire every
intended fire exactly once; a killed leader is replaced within one lease period and its
missed fires are coalesced or backfilled as each schedule asks."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_rules import db_now
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import create_schedule
from tests.helpers.processes import Service, query, services, wait_until

LEASE_SECONDS = 3.0
TICK_SECONDS = 0.2
TRIGGER_ENV = {
    "SUNDIAL_TRIGGER_LEASE_SECONDS": str(LEASE_SECONDS),
    "SUNDIAL_TRIGGER_INTERVAL_SECONDS": str(TICK_SECONDS),
}
# Startup of a Python process on a busy machine: fires begin after every trigger is up.
BOOT_SECONDS = 6

pytestmark = pytest.mark.slow


def create_fast_schedules(db_url: str, specs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Interval schedules that start firing BOOT_SECONDS from now; name -> id."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        start = db_now(conn).replace(microsecond=0) + timedelta(seconds=BOOT_SECONDS)
        return {
            name: create_schedule(
                conn,
                ScheduleSpec(
                    name=name,
                    handler="noop",
                    start_at=start,
                    exact_minute=True,
                    overlap=OverlapPolicy.ALLOW,  # no worker runs them: every fire a run
                    **spec,
                ),
            ).id
            for name, spec in specs.items()
        }


def ledger(db_url: str, schedule_id: Any) -> list[dict[str, Any]]:
    return query(
        db_url,
        "SELECT fire_time, outcome, run_id FROM schedule_fires WHERE schedule_id = %s "
        "ORDER BY fire_time",
        schedule_id,
    )


def run_fire_times(db_url: str, schedule_id: Any) -> list[datetime]:
    rows = query(
        db_url,
        "SELECT fire_time FROM job_runs WHERE schedule_id = %s ORDER BY fire_time",
        schedule_id,
    )
    return [r["fire_time"] for r in rows]


def assert_contiguous(times: list[datetime], every: int) -> None:
    """Every intended fire between the first and the last, each once."""
    assert len(times) >= 2
    expected = [times[0] + timedelta(seconds=every * k) for k in range(len(times))]
    assert times == expected


def lease(db_url: str) -> dict[str, Any] | None:
    rows = query(db_url, "SELECT holder, term, acquired_at, lease_until FROM leader_leases")
    return rows[0] if rows else None


def leader_pid(db_url: str) -> int | None:
    row = lease(db_url)
    return int(row["holder"].split(":")[1]) if row else None


def start_triggers(start: Any, count: int) -> list[Service]:
    triggers = [start("trigger", **TRIGGER_ENV) for _ in range(count)]
    for trigger in triggers:
        trigger.wait_for_log("trigger started", timeout=60)
    return triggers


@pytest.mark.parametrize("count", [2, 3])
def test_several_triggers_fire_every_intended_fire_exactly_once(
    db_url: str, tmp_path: Path, count: int
) -> None:
    ids = create_fast_schedules(
        db_url,
        {
            "every-1s": {"every_seconds": 1, "catchup": True},
            "every-2s": {"every_seconds": 2, "catchup": True},
        },
    )
    with services(db_url, tmp_path) as start:
        triggers = start_triggers(start, count)
        wait_until(
            lambda: len(ledger(db_url, ids["every-2s"])) >= 8,
            "fires to accumulate",
            timeout=60,
            service=triggers[0],
        )
        racing_from = len(ledger(db_url, ids["every-2s"]))
        wait_until(
            lambda: len(ledger(db_url, ids["every-2s"])) >= racing_from + 5,
            "several more fires from processes racing each other",
            timeout=60,
            service=triggers[0],
        )
        for trigger in triggers:
            assert trigger.stop() == 0, trigger.log()
    assert lease(db_url) is not None
    for name, every in (("every-1s", 1), ("every-2s", 2)):
        rows = ledger(db_url, ids[name])
        times = [r["fire_time"] for r in rows]
        assert_contiguous(times, every)
        assert {r["outcome"] for r in rows} == {"enqueued"}
        assert run_fire_times(db_url, ids[name]) == times
        assert len({r["run_id"] for r in rows}) == len(rows)


def test_a_killed_leader_is_replaced_within_one_lease_and_no_fire_is_lost(
    db_url: str, tmp_path: Path
) -> None:
    ids = create_fast_schedules(
        db_url,
        {
            "coalesce": {"every_seconds": 1},
            "backfill": {"every_seconds": 1, "catchup": True},
        },
    )
    with services(db_url, tmp_path) as start:
        triggers = start_triggers(start, 3)
        wait_until(lambda: len(ledger(db_url, ids["backfill"])) >= 3, "first fires", 60)
        before = lease(db_url)
        assert before is not None
        victim = next(t for t in triggers if t.pid == leader_pid(db_url))
        victim.signal(signal.SIGKILL)
        after = wait_until(
            lambda: (row := lease(db_url)) and row["term"] > before["term"] and row,
            "another trigger to take over",
            timeout=LEASE_SECONDS * 4,
        )
        # Judged on the database clock: the new leader acquired the lease no later than one
        # tick (plus scheduling slack) after the dead leader's lease ran out.
        dead_lease_end = query(db_url, "SELECT %s::timestamptz AS t", before["lease_until"])
        assert after["term"] == before["term"] + 1
        assert after["holder"] != before["holder"]
        assert after["acquired_at"] - dead_lease_end[0]["t"] < timedelta(seconds=1.5)
        fires_at_takeover = len(ledger(db_url, ids["backfill"]))
        wait_until(
            lambda: len(ledger(db_url, ids["backfill"])) >= fires_at_takeover + 3,
            "fires after the takeover",
            timeout=30,
        )
        # A clean stop resigns: the next standby takes over at once, not after the lease.
        successor = next(t for t in triggers if t.pid == leader_pid(db_url))
        held = lease(db_url)
        assert held is not None
        assert successor.stop() == 0, successor.log()
        resigned = wait_until(
            lambda: (row := lease(db_url)) and row["term"] == after["term"] + 1 and row,
            "a standby to take over from a resigning leader",
            timeout=LEASE_SECONDS * 4,
        )
        # Judged on the database clock: before the resigned lease, as last seen, ran out.
        assert resigned["acquired_at"] < held["lease_until"]
        for trigger in triggers:
            if trigger is not victim:
                trigger.stop()

    backfill = ledger(db_url, ids["backfill"])
    assert_contiguous([r["fire_time"] for r in backfill], every=1)
    assert {r["outcome"] for r in backfill} == {"enqueued"}  # every missed fire backfilled
    assert run_fire_times(db_url, ids["backfill"]) == [r["fire_time"] for r in backfill]

    coalesce = ledger(db_url, ids["coalesce"])
    assert_contiguous([r["fire_time"] for r in coalesce], every=1)  # every fire accounted for
    coalesced = [r for r in coalesce if r["outcome"] == "coalesced"]
    assert coalesced, "the fires missed while no trigger led were coalesced"
    assert {r["outcome"] for r in coalesce} == {"enqueued", "coalesced"}
    enqueued_runs = {r["run_id"] for r in coalesce if r["outcome"] == "enqueued"}
    assert {r["run_id"] for r in coalesced} <= enqueued_runs  # folded into a later run
