"""A backfill run by real `sundial trigger` and `sundial worker` processes: ten past
fires of an hourly schedule, two at once at most (checked from the runs' recorded start
and finish times), cancelled midway: its unstarted runs are cancelled, the running ones
stopped, and no further run is ever created."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.scheduling import backfills
from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import create_schedule
from tests.helpers.processes import query, services, wait_until

pytestmark = pytest.mark.slow

TRIGGER_ENV = {"SUNDIAL_TRIGGER_INTERVAL_SECONDS": "0.2"}


def runs(db_url: str, backfill_id: Any) -> list[dict[str, Any]]:
    return query(
        db_url,
        "SELECT r.id, r.status, r.started_at, r.finished_at, r.fire_time FROM schedule_fires f "
        "JOIN job_runs r ON r.id = f.run_id WHERE f.backfill_id = %s ORDER BY r.fire_time",
        backfill_id,
    )


def most_at_once(rows: list[dict[str, Any]]) -> int:
    """The most runs whose [start, finish) intervals overlap at one instant."""
    edges = []
    for r in rows:
        if r["started_at"] is not None:
            edges.append((r["started_at"], 1))
            edges.append((r["finished_at"] or datetime.max.replace(tzinfo=UTC), -1))
    now = most = 0
    for _, step in sorted(edges):  # a finish sorts before a start at the same instant
        now += step
        most = max(most, now)
    return most


def test_ten_fires_two_at_a_time_then_cancelled_midway(db_url: str, tmp_path: Path) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        spec = ScheduleSpec(name="hourly", cron="0 * * * *", timezone="Europe/Berlin",
                            handler="sleep", args={"seconds": 1.5},
                            overlap=OverlapPolicy.ALLOW)  # fmt: skip
        create_schedule(conn, spec)
        shown = backfills.start(
            conn, "hourly", start=datetime(2026, 6, 1, tzinfo=UTC),
            end=datetime(2026, 6, 1, 9, tzinfo=UTC), concurrency=2, actor="ana",
        )  # fmt: skip
    assert shown.count == 10
    backfill_id = shown.backfill_id
    with services(db_url, tmp_path) as start:
        trigger = start("trigger", **TRIGGER_ENV)
        worker = start("worker", "--concurrency", "8")
        wait_until(
            lambda: sum(r["status"] == "completed" for r in runs(db_url, backfill_id)) >= 4,
            "four backfilled runs to complete",
            timeout=90,
            service=worker,
        )
        with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
            cancelled = backfills.cancel(conn, backfill_id, actor="ana")
        assert cancelled.cancelled + cancelled.asked_to_stop <= 2
        wait_until(
            lambda: all(
                r["status"] not in ("pending", "running") for r in runs(db_url, backfill_id)
            ),
            "its last runs to end",
            timeout=60,
            service=worker,
        )
        made = len(runs(db_url, backfill_id))
        time.sleep(2)  # ten trigger ticks: none of them submits another fire
        trigger.wait_for_log("trigger started", timeout=5)
    rows = runs(db_url, backfill_id)
    assert len(rows) == made < 10
    assert most_at_once(rows) == 2  # it used its two slots, and never more
    assert [r["fire_time"] for r in rows] == sorted(r["fire_time"] for r in rows)
    (row,) = query(db_url, "SELECT status FROM backfills WHERE id = %s", backfill_id)
    assert row["status"] == "cancelled"
    statuses = {r["status"] for r in rows}
    assert statuses <= {"completed", "cancelled"}
