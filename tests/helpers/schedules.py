"""Schedules for the trigger's tests: one added at a fixed instant, the trigger's settings,
and what its fires left (runs and ledger).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from app.catalog import workflows
from app.core.config import Settings
from app.core.db import Conn
from app.dags import workflow_shapes
from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import create_schedule

T0 = datetime(2026, 5, 1, 9, 59, 30, tzinfo=UTC)


def settings(**overrides: Any) -> Settings:
    base = Settings.from_env({"SUNDIAL_TRIGGER_LEASE_SECONDS": "86400"})
    return dataclasses.replace(base, **overrides)


def add(conn: Conn, name: str, now: datetime = T0, **kw: Any) -> Any:
    kw.setdefault("handler", "noop")
    kw.setdefault("exact_minute", True)
    kw.setdefault("overlap", OverlapPolicy.ALLOW)
    return create_schedule(conn, ScheduleSpec(name=name, **kw), now=now).id


def run_fire_times(conn: Conn, schedule_id: Any) -> list[datetime]:
    rows = conn.execute(
        "SELECT fire_time FROM job_runs WHERE schedule_id = %s ORDER BY fire_time",
        (schedule_id,),
    ).fetchall()
    return [r["fire_time"] for r in rows]


def ledger(conn: Conn, schedule_id: Any) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT * FROM schedule_fires WHERE schedule_id = %s ORDER BY fire_time", (schedule_id,)
    ).fetchall()


def define_etl(conn: Conn) -> None:
    for job in ("extract", "load"):
        conn.execute(
            "INSERT INTO job_definitions (id, name, handler) "
            "VALUES (gen_random_uuid(), %s, 'noop')",
            (job,),
        )
    steps = {
        "extract": workflow_shapes.Step("extract"),
        "load": workflow_shapes.Step("load", {"x": 1}),
    }
    workflows.define(
        conn, workflows.WorkflowSpec("etl", steps, [("extract", "load")]), actor="test"
    )
