"""A stored workflow as the runs it starts: each step a run of its job definition (the
job's args under the step's), and the edges between steps. The trigger starts workflow
schedules' fires from these shapes; `app.catalog.workflows` runs one now.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.db import Conn
from app.core.sql import query
from app.runs.run_inserts import NewRun


@dataclass(frozen=True, slots=True)
class Step:
    job: str  # job definition name
    args: dict[str, Any] = field(default_factory=dict)  # merged over the job's args


@dataclass(frozen=True, slots=True)
class Shape:
    """A workflow ready to run: steps as runs of their jobs, and the edges."""

    workflow_id: uuid.UUID
    name: str
    steps: dict[str, Step]
    runs: dict[str, NewRun]
    edges: list[tuple[str, str]]


def shapes(conn: Conn, workflow_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Shape]:
    """Workflows by id with each step turned into a run of its job definition."""
    rows = conn.execute(
        query("workflows", "workflow_steps_with_jobs"), {"ids": list(workflow_ids)}
    ).fetchall()
    edge_rows = conn.execute(
        query("workflows", "workflow_edges_of"), {"ids": list(workflow_ids)}
    ).fetchall()
    result: dict[uuid.UUID, Shape] = {}
    for r in rows:
        shape = result.setdefault(
            r["workflow_id"], Shape(r["workflow_id"], r["workflow_name"], {}, {}, [])
        )
        shape.steps[r["step"]] = Step(r["job_name"], r["step_args"])
        shape.runs[r["step"]] = NewRun(
            handler=r["handler"],
            args={**r["job_args"], **r["step_args"]},
            priority=r["priority"],
            timeout_seconds=r["timeout_seconds"],
            max_retries=r["max_retries"],
            execution_model=r["execution_model"],
            job_id=r["job_id"],
            queue=r["queue"],
        )
    for e in edge_rows:
        result[e["workflow_id"]].edges.append((e["upstream"], e["downstream"]))
    return result
