"""Starting fires: a job schedule's fire is one run, a workflow schedule's one DAG run.
Nothing here writes a run itself: it goes through `app.runs.submission` and
`app.dags.dag_submission`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core.db import Conn
from app.dags import dag_submission
from app.dags.workflow_shapes import Shape
from app.dags.workflow_shapes import shapes as shapes_of
from app.runs import run_inserts, submission


@dataclass(frozen=True, slots=True)
class Start:
    """A fire to start. `schedule` holds the schedule's id, name, job_id and workflow_id."""

    schedule: Mapping[str, Any]
    fire_time: datetime
    run_at: datetime


@dataclass(frozen=True, slots=True)
class Started:
    """What a fire created; both None when the fire already had its run (or DAG run)."""

    run_id: int | None = None
    dag_run_id: uuid.UUID | None = None


def workflow_shapes(conn: Conn, workflow_ids: Iterable[uuid.UUID | None]) -> dict[uuid.UUID, Shape]:
    """The runnable shape of each workflow; a workflow without steps has none."""
    wanted = sorted({w for w in workflow_ids if w is not None})
    return shapes_of(conn, wanted) if wanted else {}


def start_fires(
    conn: Conn, starts: Sequence[Start], shapes: Mapping[uuid.UUID, Shape]
) -> list[Started]:
    """Create the run or DAG run of each fire, in two statements at most. Neither commits;
    the caller's transaction also records the fires."""
    started = [Started()] * len(starts)
    jobs = [(i, s) for i, s in enumerate(starts) if s.schedule["workflow_id"] is None]
    flows = [(i, s) for i, s in enumerate(starts) if s.schedule["workflow_id"] is not None]
    if jobs:
        run_ids = submission.submit_fires(conn, [_fire_request(s) for _, s in jobs])
        for (i, _), run_id in zip(jobs, run_ids, strict=True):
            started[i] = Started(run_id=run_id)
    if flows:
        fires = [_workflow_fire(s, shapes[s.schedule["workflow_id"]]) for _, s in flows]
        dag_run_ids = dag_submission.submit_workflow_fires(conn, fires)
        for (i, _), dag_run_id in zip(flows, dag_run_ids, strict=True):
            started[i] = Started(dag_run_id=dag_run_id)
    return started


def _fire_request(start: Start) -> run_inserts.FireRequest:
    return run_inserts.FireRequest(
        schedule_id=start.schedule["id"],
        job_id=start.schedule["job_id"],
        fire_time=start.fire_time,
        run_at=start.run_at,
    )


def _workflow_fire(start: Start, shape: Shape) -> dag_submission.WorkflowFire:
    return dag_submission.WorkflowFire(
        schedule_id=start.schedule["id"],
        workflow_id=shape.workflow_id,
        name=start.schedule["name"],
        fire_time=start.fire_time,
        run_at=start.run_at,
        steps=shape.runs,
        edges=shape.edges,
    )
