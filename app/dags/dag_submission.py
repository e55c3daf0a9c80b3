"""Submitting DAG runs: a DAG's runs and edges in one transaction, a workflow schedule's
fires as DAG runs, and one run that starts after others (`submit_after`).

A step with upstreams starts `blocked`; the transition module releases it when its last
upstream completes (`app.runs.transitions`, in the transaction of that ending).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core import limits
from app.core.db import Conn
from app.core.json_rows import json_rows
from app.core.sql import query
from app.dags.dag_graph import DagError, check_dag
from app.handlers.gate import refuse_disabled_handlers
from app.runs import moved_runs
from app.runs.run_inserts import (
    NewRun,
    insert_runs,
    run_row,
)
from app.runs.states import RunStatus
from app.runs.submission import submit
from app.runs.transitions import ENDED_WITHOUT_COMPLETING


@dataclass(frozen=True, slots=True)
class SubmittedDag:
    id: uuid.UUID  # the DAG run
    run_ids: dict[str, int]  # node name -> run id


@dataclass(frozen=True, slots=True)
class WorkflowFire:
    """A workflow schedule's fire to turn into one DAG run (see the trigger)."""

    schedule_id: uuid.UUID
    workflow_id: uuid.UUID
    name: str
    fire_time: datetime
    run_at: datetime
    steps: Mapping[str, NewRun]
    edges: Sequence[tuple[str, str]]


def submit_dag(
    conn: Conn,
    nodes: Mapping[str, NewRun],
    edges: Sequence[tuple[str, str]],
    *,
    name: str = "",
    workflow_id: uuid.UUID | None = None,
    now: datetime | None = None,
) -> SubmittedDag:
    """(new) -> pending (no upstreams) | blocked: a whole DAG in one transaction.

    `edges` are (upstream, downstream) node names. Unknown nodes, self-edges and cycles are
    refused with a DagError naming them; nothing is written then.
    """
    limits.check_text("the DAG run's name", name, limits.MAX_NAME_LENGTH)
    check_dag(nodes, edges)
    for node in nodes.values():
        node.validate()
        if node.idempotency_key is not None:
            raise DagError("runs inside a DAG cannot carry their own idempotency key")
    refuse_disabled_handlers(conn, {node.handler for node in nodes.values()})
    dag_id = uuid.uuid4()
    with conn.transaction():
        _create_dag_runs(
            conn,
            [{"id": str(dag_id), "name": name, "workflow_id": workflow_id and str(workflow_id)}],
        )
        ids = _insert_dag_steps(conn, dag_id, nodes, edges, now)
    return SubmittedDag(dag_id, ids)


def submit_workflow_fires(conn: Conn, fires: Sequence[WorkflowFire]) -> list[uuid.UUID | None]:
    """(new) -> pending | blocked: one DAG run per workflow fire, every step carrying the
    fire's schedule and fire_time; None where that fire already has its DAG run.

    Does not commit: the trigger records fires and advances schedules in the same
    transaction.
    """
    for fire in fires:
        check_dag(fire.steps, fire.edges)
    planned = {uuid.uuid4(): fire for fire in fires}
    created = set(
        _create_dag_runs(
            conn,
            [
                {
                    "id": str(dag_id),
                    "name": fire.name,
                    "workflow_id": str(fire.workflow_id),
                    "schedule_id": str(fire.schedule_id),
                    "fire_time": fire.fire_time.isoformat(),
                }
                for dag_id, fire in planned.items()
            ],
        )
    )
    for dag_id in created:
        fire = planned[dag_id]
        extra = {
            "schedule_id": str(fire.schedule_id),
            "fire_time": fire.fire_time.isoformat(),
            "run_at": fire.run_at.isoformat(),
        }
        _insert_dag_steps(conn, dag_id, fire.steps, fire.edges, None, extra)
    return [dag_id if dag_id in created else None for dag_id in planned]


def _create_dag_runs(conn: Conn, dag_runs: list[dict[str, Any]]) -> list[uuid.UUID]:
    rows = conn.execute(
        query("dags", "dag_run_create_many"), {"dag_runs": json_rows(dag_runs)}
    ).fetchall()
    return [r["id"] for r in rows]


def _insert_dag_steps(
    conn: Conn,
    dag_id: uuid.UUID,
    nodes: Mapping[str, NewRun],
    edges: Sequence[tuple[str, str]],
    now: datetime | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Insert a checked DAG's runs (blocked until their upstreams complete) and edges."""
    upstream_count = dict.fromkeys(nodes, 0)
    unique_edges = sorted(set(edges))
    for _, downstream in unique_edges:
        upstream_count[downstream] += 1
    names = list(nodes)
    rows = [
        run_row(
            nodes[name],
            status=RunStatus.BLOCKED if upstream_count[name] else RunStatus.PENDING,
            upstream_remaining=upstream_count[name],
            dag_run_id=str(dag_id),
            dag_node=name,
            **(extra or {}),
        )
        for name in names
    ]
    inserted = insert_runs(conn, rows, now)
    ids = dict(zip(names, (run_id for run_id, _ in inserted), strict=True))
    if unique_edges:
        conn.execute(
            query("runs", "run_dag_edges"),
            {
                "run_ids": [ids[d] for _, d in unique_edges],
                "depends_on": [ids[u] for u, _ in unique_edges],
            },
        )
    return ids


def submit_after(
    conn: Conn, run: NewRun, after: Sequence[int], *, now: datetime | None = None
) -> int:
    """(new) -> blocked | pending | skipped: one run that starts after `after` complete.

    The upstreams are locked while the run and its edges are inserted, so none can finish
    unseen in between: an upstream that already completed counts as done, one that ended
    otherwise skips the new run at once.
    """
    run.validate()
    for upstream in after:
        limits.check_run_id("a run to start after", upstream)
    if not after:
        return submit(conn, run, now=now).id
    with conn.transaction():
        upstreams = conn.execute(
            query("runs", "run_lock_upstreams"), {"ids": sorted(set(after))}
        ).fetchall()
        missing = sorted(set(after) - {u["id"] for u in upstreams})
        if missing:
            moved = moved_runs.in_history(conn, missing[0], instead="submit without waiting on it")
            raise DagError(f"cannot run after run {missing[0]}: {moved or 'there is no such run'}")
        dag_id = next((u["dag_run_id"] for u in upstreams if u["dag_run_id"]), None)
        if dag_id is None:
            dag_id = uuid.uuid4()
            _create_dag_runs(conn, [{"id": str(dag_id), "name": f"after run {after[0]}"}])
        conn.execute(
            query("runs", "run_join_dag"),
            {"dag_run_id": dag_id, "ids": [u["id"] for u in upstreams]},
        )
        remaining = sum(u["status"] != RunStatus.COMPLETED for u in upstreams)
        failed_upstream = any(u["status"] in ENDED_WITHOUT_COMPLETING for u in upstreams)
        status = (
            RunStatus.SKIPPED
            if failed_upstream
            else (RunStatus.BLOCKED if remaining else RunStatus.PENDING)
        )
        row = run_row(
            run,
            status=status,
            upstream_remaining=0 if failed_upstream else remaining,
            dag_run_id=str(dag_id),
            skip_reason="upstream_failed" if failed_upstream else None,
        )
        ((run_id, _),) = insert_runs(conn, [row], now)
        conn.execute(
            query("runs", "run_dag_edges"),
            {"run_ids": [run_id] * len(upstreams), "depends_on": [u["id"] for u in upstreams]},
        )
    return run_id
