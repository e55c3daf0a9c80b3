"""DAG runs for the dashboard: the recent ones with their steps counted, and one DAG run
as a layered picture (`app.dags.dag_layout`) with each step's live status.

A step's status is its run's, except a pending run that already had an attempt, which is
"retrying" (waiting for its backoff). Steps joined with `--after` have no step name; they
are named after their run ("run 12").
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core.db import Conn
from app.core.sql import query
from app.dags.dag_layout import Layout, layout

PAGE_SIZE = 50
ACTIVE = ("pending", "blocked", "running")


def recent(
    conn: Conn, *, before: datetime | None = None, limit: int = PAGE_SIZE
) -> list[dict[str, Any]]:
    rows = conn.execute(
        query("dag_runs", "dag_runs_recent"), {"before": before, "limit": limit}
    ).fetchall()
    for row in rows:
        row["status"] = overall_status(row)
    return rows


def overall_status(counts: dict[str, int]) -> str:
    """One word for a DAG run from its steps' counts."""
    if counts["running"]:
        return "running"
    if counts["waiting"]:
        return "failed" if counts["failed"] else "pending"
    if counts["failed"]:
        return "failed"
    if counts["total"] and counts["completed"] == counts["total"]:
        return "completed"
    return "cancelled" if counts["other"] else "pending"


@dataclass(frozen=True, slots=True)
class DagPicture:
    dag_run: dict[str, Any]
    steps: list[dict[str, Any]]
    picture: Layout
    status_of: dict[str, str]
    link_of: dict[str, str]

    @property
    def live(self) -> bool:
        return any(step["status"] in ACTIVE for step in self.steps)


def step_name(step: dict[str, Any]) -> str:
    return str(step["dag_node"] or f"run {step['id']}")


def step_status(step: dict[str, Any]) -> str:
    if step["status"] == "pending" and step["attempt"] > 0:
        return "retrying"
    return str(step["status"])


def picture(conn: Conn, dag_run_id: uuid.UUID) -> DagPicture | None:
    """The DAG run, its steps, and where to draw them; None when there is no such run."""
    dag_run = conn.execute(query("dag_runs", "dag_run_get"), {"id": dag_run_id}).fetchone()
    if dag_run is None:
        return None
    steps = conn.execute(query("dag_runs", "dag_run_steps"), {"id": dag_run_id}).fetchall()
    edges = conn.execute(query("dag_runs", "dag_run_edges"), {"id": dag_run_id}).fetchall()
    name_of = {s["id"]: step_name(s) for s in steps}
    pairs = [
        (name_of[e["depends_on"]], name_of[e["run_id"]])
        for e in edges
        if e["depends_on"] in name_of and e["run_id"] in name_of
    ]
    return DagPicture(
        dag_run=dag_run,
        steps=steps,
        picture=layout(list(name_of.values()), pairs),
        status_of={name_of[s["id"]]: step_status(s) for s in steps},
        link_of={name_of[s["id"]]: f"/runs/{s['id']}" for s in steps},
    )
