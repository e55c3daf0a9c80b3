"""Workflows: named, reusable DAGs over job definitions, stored in the database.

A workflow's steps each name a job definition (and may add args over the job's own); its
edges say which step waits for which. Running a workflow — now, or on each fire of a
schedule — creates one DAG run whose steps are runs of those jobs.

    with transaction(url) as conn:
        define(conn, WorkflowSpec("etl", steps={"extract": Step("extract"),
                                                "load": Step("load")},
                                  edges=[("extract", "load")]), actor="alice")
        run_now(conn, "etl", actor="alice")

Every operation is one transaction; bad input raises WorkflowError with one sentence and
writes nothing. Each change is written to the audit log (before -> after, as `show` prints
a workflow) in the same transaction; the CLI passes `audit.cli_actor()`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from app.catalog import hand_runs
from app.core import limits
from app.core.db import Conn
from app.core.errors import Missing, UsageError
from app.core.sql import query
from app.dags import dag_graph, dag_submission
from app.dags.dag_spec import DagSpecError
from app.dags.workflow_shapes import Step, shapes
from app.handlers.gate import refuse_disabled_handlers
from app.people import audit, versions
from app.runs.run_inserts import NewRun
from app.scheduling.schedules import delete as delete_schedule


class WorkflowError(UsageError):
    """A workflow cannot be defined or run as asked; the message says why. `field` names
    the input at fault: "name", "description", "steps" (their shape), or "step:NAME"."""


class StepJobMissing(WorkflowError, Missing):
    """A step names a job definition that does not exist."""


@dataclass(frozen=True, slots=True)
class WorkflowSpec:
    name: str
    steps: Mapping[str, Step]
    edges: Sequence[tuple[str, str]] = ()
    description: str = ""


def parse_spec(name: str, doc: Any, description: str = "") -> WorkflowSpec:
    """A workflow from JSON: {"steps": {"a": {"job": "extract", "args": {…},
    "after": [...]}}, "edges": [["a", "b"]]}."""
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), dict) or not doc["steps"]:
        raise WorkflowError('a workflow is a JSON object with a non-empty "steps" object')
    unknown = set(doc) - {"steps", "edges", "description"}
    if unknown:
        raise WorkflowError(f"unknown key {sorted(unknown)[0]!r} (use steps, edges)")
    steps: dict[str, Step] = {}
    edges: list[tuple[str, str]] = []
    for step_name, step in doc["steps"].items():
        if not isinstance(step, dict) or not isinstance(step.get("job"), str):
            raise WorkflowError(f'step {step_name!r} must be an object with a "job" name')
        extra = set(step) - {"job", "args", "after"}
        if extra:
            raise WorkflowError(f"step {step_name!r} has an unknown key {sorted(extra)[0]!r}")
        args = step.get("args", {})
        after = step.get("after", [])
        if not isinstance(args, dict):
            raise WorkflowError(f'step {step_name!r}: "args" must be a JSON object')
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise WorkflowError(f'step {step_name!r}: "after" must be a list of step names')
        steps[step_name] = Step(step["job"], args)
        edges += [(upstream, step_name) for upstream in after]
    raw_edges = doc.get("edges", [])
    if not isinstance(raw_edges, list) or not all(
        isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e)
        for e in raw_edges
    ):
        raise WorkflowError('"edges" must be a list of [upstream, downstream] step pairs')
    edges += [(u, d) for u, d in raw_edges]
    return WorkflowSpec(name, steps, edges, str(doc.get("description", description)))


def define(
    conn: Conn,
    spec: WorkflowSpec,
    *,
    actor: str,
    replace: bool = False,
    action: str | None = None,
    now: datetime | None = None,
) -> uuid.UUID:
    """Create a workflow, or with `replace` redefine an existing one (steps and edges).
    Audited as `action`, by default workflow.create or workflow.update."""
    if not isinstance(spec.name, str) or not spec.name.strip():
        raise WorkflowError("a workflow needs a name", "name")
    if not spec.steps:
        raise WorkflowError("a workflow needs at least one step", "steps")
    _check_fields(spec)
    _check_shape(spec)
    jobs = _jobs_named(conn, {s.job for s in spec.steps.values()})
    refuse_disabled_handlers(conn, {job["handler"] for job in jobs.values()})
    with conn.transaction():
        existing = conn.execute(
            query("workflows", "workflow_lock_by_name"), {"name": spec.name}
        ).fetchone()
        if existing and not replace:
            raise WorkflowError(f"a workflow named {spec.name!r} already exists", "name")
        if not existing and replace:
            raise WorkflowError(f"there is no workflow named {spec.name!r}")
        before = _snapshot_of(conn, existing["id"]) if existing else None
        workflow_id = existing["id"] if existing else uuid.uuid4()
        conn.execute(
            query("workflows", "workflow_upsert"),
            {"id": workflow_id, "name": spec.name, "description": spec.description, "now": now},
        )
        conn.execute(query("workflows", "workflow_steps_clear"), {"id": workflow_id})
        conn.execute(
            query("workflows", "workflow_steps_insert"),
            {
                "id": workflow_id,
                "names": list(spec.steps),
                "job_ids": [jobs[s.job]["id"] for s in spec.steps.values()],
                "args": [Jsonb(s.args) for s in spec.steps.values()],
            },
        )
        edges = sorted(set(spec.edges))
        conn.execute(
            query("workflows", "workflow_edges_insert"),
            {"id": workflow_id, "ups": [u for u, _ in edges], "downs": [d for _, d in edges]},
        )
        audit.record(
            conn,
            actor,
            action or ("workflow.update" if existing else "workflow.create"),
            "workflow",
            spec.name,
            before=before,
            after=snapshot(spec),
            subject_id=workflow_id,
        )
    return workflow_id


def snapshot(spec: WorkflowSpec) -> dict[str, Any]:
    """A workflow as the audit log and `show` write it (edges sorted, so equal shapes
    compare equal)."""
    return {
        "name": spec.name,
        "description": spec.description,
        "steps": {n: {"job": s.job, "args": s.args} for n, s in spec.steps.items()},
        "edges": [list(e) for e in sorted(set(spec.edges))],
    }


def _snapshot_of(conn: Conn, workflow_id: uuid.UUID) -> dict[str, Any]:
    row = conn.execute(query("workflows", "workflow_by_id"), {"id": workflow_id}).fetchone()
    assert row is not None  # callers hold its lock
    shape = shapes(conn, [workflow_id]).get(workflow_id)
    steps = shape.steps if shape else {}
    edges = shape.edges if shape else []
    return snapshot(WorkflowSpec(row["name"], steps, edges, row["description"]))


def _check_fields(spec: WorkflowSpec) -> None:
    """Names, args and description within the ranges of `app.core.limits`."""
    with _refused_on("name"):
        limits.check_name("a workflow name", spec.name)
    with _refused_on("description"):
        limits.check_text("the description", spec.description)
    for step_name, step in spec.steps.items():
        with _refused_on(f"step:{step_name}"):
            limits.check_name("a step name", step_name)
            limits.check_name(f"the job of step {step_name!r}", step.job)
            limits.check_args(f"the args of step {step_name!r}", step.args)


@contextlib.contextmanager
def _refused_on(field_name: str) -> Iterator[None]:
    try:
        yield
    except limits.LimitError as exc:
        raise WorkflowError(str(exc), field_name) from None


def _check_shape(spec: WorkflowSpec) -> None:
    message = cycle_message(list(spec.steps), spec.edges)
    if message:
        raise WorkflowError(message, "steps")
    nodes = {name: NewRun("placeholder") for name in spec.steps}
    try:
        dag_graph.check_dag(nodes, spec.edges)
    except (dag_graph.DagError, DagSpecError) as exc:
        raise WorkflowError(f"workflow {spec.name!r}: {exc}", "steps") from None


def cycle_message(steps: Sequence[str], edges: Sequence[tuple[str, str]]) -> str | None:
    """None when the edges (upstream, downstream) make no cycle; else a sentence naming
    an edge that closes one, and the whole loop:

    step `load` cannot run after `report`: `report` already runs after `load`
    (load → transform → report → load)

    Edges that point down the list of steps are taken first, so the edge named is the
    one that points back up: the odd one out a person most likely just added.
    """
    if _acyclic(steps, edges):
        return None  # the common case, in linear time
    downstream: dict[str, list[str]] = {name: [] for name in steps}
    position = {name: i for i, name in enumerate(steps)}

    def points_back(edge: tuple[str, str]) -> bool:
        return position.get(edge[0], 0) > position.get(edge[1], 0)

    for up, down in sorted(edges, key=points_back):
        if up == down:
            return f"step `{down}` cannot run after itself"
        if up not in downstream or down not in downstream:
            continue  # an unknown step is refused on its own, with its own message
        path = _path(downstream, down, up)
        if path is not None:
            loop = " → ".join([*path, down])
            return (
                f"step `{down}` cannot run after `{up}`: `{up}` already runs after "
                f"`{down}` ({loop})"
            )
        downstream[up].append(down)
    return None


def _acyclic(steps: Sequence[str], edges: Sequence[tuple[str, str]]) -> bool:
    """Kahn's algorithm over the edges between known steps."""
    waiting = dict.fromkeys(steps, 0)
    following: dict[str, list[str]] = {name: [] for name in steps}
    for up, down in set(edges):
        if up in waiting and down in waiting:
            following[up].append(down)
            waiting[down] += 1
    ready = [name for name, count in waiting.items() if count == 0]
    for name in ready:
        for down in following[name]:
            waiting[down] -= 1
            if waiting[down] == 0:
                ready.append(down)
    return len(ready) == len(waiting)


def _path(downstream: Mapping[str, list[str]], start: str, goal: str) -> list[str] | None:
    """A path start → … → goal along the edges so far (breadth-first: the shortest)."""
    came_from: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            if node == goal:
                path: list[str] = []
                step: str | None = node
                while step is not None:
                    path.append(step)
                    step = came_from[step]
                return path[::-1]
            for nxt in downstream[node]:
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    return None


def _jobs_named(conn: Conn, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    wanted = sorted(set(names))
    rows = conn.execute(query("workflows", "job_definitions_by_names"), {"names": wanted})
    found = {r["name"]: r for r in rows.fetchall()}
    missing = [n for n in wanted if n not in found]
    if missing:
        raise StepJobMissing(
            f"there is no job definition named {missing[0]!r} (create it with "
            f"`sundial job add {missing[0]} --handler …`)",
            "steps",
        )
    return found


def _check_lookup(name: str) -> None:
    with limits.refused_as(WorkflowError):
        limits.check_name("a workflow name", name)


def delete(conn: Conn, name: str, *, actor: str, with_schedules: bool = False) -> list[str]:
    """Delete a workflow; its past DAG runs stay as history.

    The schedules that run it would go with it, fire ledger and all, so while there are
    any it is refused, unless `with_schedules` says to delete them too. Returns the names
    of the schedules deleted with it.
    """
    with conn.transaction():
        # The lock makes a schedule created meanwhile wait, then fail on the missing row.
        row = conn.execute(query("workflows", "workflow_lock_by_name"), {"name": name}).fetchone()
        if row is None:
            raise WorkflowError(f"there is no workflow named {name!r}")
        schedules = [
            r["name"]
            for r in conn.execute(query("workflows", "workflow_schedule_names"), {"id": row["id"]})
        ]
        if schedules and not with_schedules:
            raise WorkflowError(
                f"workflow {name!r} is run by schedule(s) {', '.join(map(repr, schedules))}: "
                "delete them first, or delete them with it (--with-schedules)"
            )
        before = {**_snapshot_of(conn, row["id"]), "schedules": schedules}
        for schedule in schedules:  # each audited as its own deletion
            delete_schedule(conn, schedule, actor=actor)
        conn.execute(query("workflows", "workflow_delete"), {"id": row["id"]})
        audit.record(conn, actor, "workflow.delete", "workflow", name, before=before,
                     subject_id=row["id"])  # fmt: skip
    return schedules


def list_all(conn: Conn) -> list[dict[str, Any]]:
    return list(conn.execute(query("workflows", "workflow_list")).fetchall())


def show(conn: Conn, name: str) -> dict[str, Any]:
    _check_lookup(name)
    row = conn.execute(query("workflows", "workflow_by_name"), {"name": name}).fetchone()
    if row is None:
        raise WorkflowError(f"there is no workflow named {name!r}")
    (shape,) = shapes(conn, [row["id"]]).values()
    return {
        "name": row["name"],
        "description": row["description"],
        "steps": {n: {"job": s.job, "args": s.args} for n, s in shape.steps.items()},
        "edges": [list(e) for e in shape.edges],
    }


def detail(conn: Conn, name: str) -> dict[str, Any]:
    """`show`, with the schedules that run it and its newest DAG run's step statuses
    (`last_run`: None, or id, created_at and steps: {step: {status, run_id}})."""
    workflow = show(conn, name)
    row = conn.execute(query("workflows", "workflow_by_name"), {"name": name}).fetchone()
    assert row is not None
    schedules = [
        r["name"]
        for r in conn.execute(query("workflows", "workflow_schedule_names"), {"id": row["id"]})
    ]
    last = conn.execute(query("workflows", "workflow_last_dag_run"), {"id": row["id"]}).fetchone()
    last_run = None
    if last is not None:
        steps = conn.execute(
            query("workflows", "workflow_dag_run_steps"), {"dag_run_id": last["id"]}
        ).fetchall()
        last_run = {
            "id": last["id"],
            "created_at": last["created_at"],
            "steps": {s["step"]: {"status": s["status"], "run_id": s["run_id"]} for s in steps},
        }
    return {**workflow, "schedules": schedules, "last_run": last_run}


def run_now(
    conn: Conn,
    name: str,
    now: datetime | None = None,
    *,
    actor: str | None = None,
    args: Mapping[str, Mapping[str, Any]] | None = None,
) -> dag_submission.SubmittedDag:
    """One DAG run of the workflow, due at once; a person's (`actor`) is audited with it,
    with each step's arguments. `args` gives the arguments of some steps by step name
    (instead of the job's args under the step's), checked like a job's own: a misfit is a
    WorkflowError on field `step:NAME.args[.PROPERTY]` and starts nothing."""
    _check_lookup(name)
    with conn.transaction():
        row = conn.execute(query("workflows", "workflow_by_name"), {"name": name}).fetchone()
        if row is None:
            raise WorkflowError(f"there is no workflow named {name!r}")
        shape = shapes(conn, [row["id"]])[row["id"]]
        runs = dict(shape.runs)
        for step, given in (args or {}).items():
            if step not in runs:
                raise WorkflowError(f"workflow {name!r} has no step named {step!r}", "steps")
            try:
                checked = hand_runs.check_args(conn, runs[step].handler, dict(given), now)
            except UsageError as exc:
                raise WorkflowError(f"step {step}: {exc}", f"step:{step}.{exc.field}") from None
            runs[step] = dataclasses.replace(runs[step], args=checked)
        dag = dag_submission.submit_dag(
            conn, runs, shape.edges, name=name, workflow_id=row["id"], now=now
        )
        if actor is not None:
            used = {step: run.args for step, run in runs.items()}
            after = {"dag_run_id": str(dag.id), "runs": dag.run_ids, "args": used}
            audit.record(conn, actor, "workflow.run", "workflow", name, after=after,
                         subject_id=row["id"])  # fmt: skip
    return dag


def apply_snapshot(
    conn: Conn, name: str, snapshot: Mapping[str, Any], *, actor: str, action: str
) -> None:
    """Make workflow `name` as `snapshot` (an audit after-snapshot) describes it again:
    description, steps and edges; checked like any edit (its jobs must still exist)."""
    steps = {n: Step(s["job"], dict(s.get("args") or {})) for n, s in snapshot["steps"].items()}
    edges = [(u, d) for u, d in snapshot.get("edges", [])]
    spec = WorkflowSpec(name, steps, edges, str(snapshot.get("description") or ""))
    define(conn, spec, actor=actor, replace=True, action=action)


versions.register(
    versions.Kind(
        "workflow",
        ("workflow.create", "workflow.update"),
        apply_snapshot,
        ("workflows", "workflow_by_name"),
    )
)
