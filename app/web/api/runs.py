"""Runs over the API: submit (one, a batch, a DAG), read, list, history, cancel, retry — through
`app.runs.transitions`, the functions the CLI calls.

Idempotency: a key seen before with the same payload answers 200 with that run; with a
different payload 409, naming the fields that differ (the state module refuses a different
handler or args; the other settings are compared here, so a retried request that changed
its priority is not silently given the old run).
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.responses import Response
from starlette.routing import Route

from app.catalog import job_definitions
from app.catalog.job_definitions import JobError
from app.core.db import Conn
from app.core.sql import query
from app.dags import dag_graph, dag_submission, dag_timeline
from app.people.roles import Role
from app.runs import run_actions, run_inserts, run_list, run_reads, run_timeline, submission
from app.runs.run_actions import RunActionRefused
from app.runs.run_fields import RunDetailRow, RunRow
from app.runs.run_inserts import NewRun
from app.web.api.core import PREFIX, ApiCall, ApiError, json_response, operation
from app.web.api.schemas import (
    BatchOut,
    CancelOut,
    DagIn,
    DagOut,
    DagRunOut,
    DagTimelineOut,
    RetryOut,
    RunBatchIn,
    RunDetailOut,
    RunEventOut,
    RunEventsOut,
    RunIn,
    RunOut,
    RunPageOut,
    RunPageQuery,
    SubmittedIdOut,
    SubmittedOut,
)
from app.web.database import call

# What must match for a resubmitted key to name the same run.
PAYLOAD_FIELDS = ("handler", "args", "priority", "timeout_seconds", "max_retries",
                  "execution_model", "job_id", "queue")  # fmt: skip


def _new_run(conn: Conn, given: RunIn) -> NewRun:
    """The run `given` asks for: a handler's, or a job definition's with its settings as
    defaults."""
    if (given.handler is None) == (given.job is None):
        raise ApiError(422, "give either handler or job", "handler")
    if given.delay_seconds is not None and given.run_at is not None:
        raise ApiError(422, "give delay_seconds or run_at, not both", "delay_seconds")
    base: dict[str, Any] = {"handler": given.handler, "args": {}}
    if given.job is not None:
        try:
            job = job_definitions.get(conn, given.job)
        except JobError as exc:  # it names no job definition
            raise ApiError(404, str(exc), "job") from None
        base = {k: job[k] for k in ("handler", "args", "priority", "timeout_seconds",
                                    "max_retries", "execution_model", "queue")}  # fmt: skip
        base["job_id"] = job["id"]
    settings = given.model_dump(
        include={"args", "priority", "timeout_seconds", "max_retries", "execution_model", "queue"},
        exclude_none=True,
    )
    if "execution_model" in settings:
        settings["execution_model"] = settings["execution_model"].value
    return NewRun(
        **{**base, **settings},
        delay=given.delay_seconds,
        run_at=given.run_at,
        deadline=given.deadline,
        idempotency_key=given.idempotency_key,
    )


def _differences(new_run: NewRun, row: RunRow | dict[str, Any]) -> list[str]:
    values = row.model_dump() if isinstance(row, RunRow) else row
    return [f for f in PAYLOAD_FIELDS if getattr(new_run, f) != values[f]]


def _conflict(conn: Conn, new_run: NewRun) -> ApiError:
    row = conn.execute(query("api", "api_run_by_key"), {"key": new_run.idempotency_key}).fetchone()
    assert row is not None  # the state module found it there
    differ = _differences(new_run, row)
    return ApiError(
        409,
        f"idempotency key {new_run.idempotency_key!r} already belongs to run {row['id']}, "
        f"submitted with a different {', '.join(differ)}; use a new key for a different run",
        differ[0] if differ else None,
    )


def _submit(conn: Conn, given: RunIn) -> tuple[bool, RunRow]:
    new_run = _new_run(conn, given)
    try:
        submitted = submission.submit(conn, new_run)
    except run_inserts.IdempotencyConflict:
        raise _conflict(conn, new_run) from None
    row = _run(conn, submitted.id)
    if not submitted.created and _differences(new_run, row):
        raise _conflict(conn, new_run)
    return submitted.created, row


def _submit_many(conn: Conn, given: list[RunIn]) -> list[submission.Submitted]:
    new_runs = []
    for n, item in enumerate(given):
        try:
            new_runs.append(_new_run(conn, item))
        except ApiError as exc:
            raise ApiError(
                exc.status, f"runs.{n}: {exc.message}", f"runs.{n}.{exc.field}"
            ) from None
    try:
        return submission.submit_many(conn, new_runs)
    except run_inserts.IdempotencyConflict as exc:
        raise ApiError(409, str(exc), "idempotency_key") from None


def _run(conn: Conn, run_id: int) -> RunRow:
    row = run_reads.run(conn, run_id)
    if row is None:
        raise ApiError(404, f"there is no run {run_id}")
    return row


def _run_with_attempts(conn: Conn, run_id: int) -> RunDetailRow:
    row = run_reads.run_with_attempts(conn, run_id)
    if row is None:
        raise ApiError(404, f"there is no run {run_id}")
    return row


def _page(conn: Conn, where: RunPageQuery) -> dict[str, Any]:
    schedule_id = None
    if where.schedule is not None:
        found = conn.execute(
            query("schedules", "schedule_by_name"), {"name": where.schedule}
        ).fetchone()
        if found is None:
            raise ApiError(404, f"there is no schedule named {where.schedule!r}")
        schedule_id = found["id"]
    params = {
        "before": where.before,
        "status": where.status and where.status.value,
        "handler": where.handler,
        "schedule_id": schedule_id,
        **run_list.search_params(where.search),
        "limit": where.limit + 1,
    }
    page = run_list.execute(conn, "api", "api_run_page", params)
    rows = page.fetchall()
    more = len(rows) > where.limit
    rows = rows[: where.limit]
    return {"runs": rows, "next": rows[-1]["id"] if more else None}


def _cancel(conn: Conn, run_id: int, actor: str) -> tuple[str, RunRow]:
    _run(conn, run_id)  # 404 for an unknown run
    try:
        status = run_actions.cancel(conn, run_id, actor=actor)
    except RunActionRefused as exc:
        raise ApiError(409, str(exc), "status") from None
    return status, _run(conn, run_id)


def _retry(conn: Conn, run_id: int, actor: str) -> tuple[list[int], RunRow]:
    _run(conn, run_id)  # 404 for an unknown run
    try:
        retried = run_actions.retry(conn, run_id, actor=actor)
    except RunActionRefused as exc:
        raise ApiError(409, str(exc), "status") from None
    return retried.unskipped, _run(conn, run_id)


def _events(conn: Conn, run_id: int) -> RunEventsOut:
    events = run_timeline.events_of_run(conn, run_id)
    if events is None:
        raise ApiError(404, f"there is no run {run_id}")
    out = [RunEventOut.model_validate(e, from_attributes=True) for e in events]
    return RunEventsOut(run_id=run_id, events=out)


def _submit_dag(conn: Conn, dag: DagIn) -> dag_submission.SubmittedDag:
    nodes: dict[str, NewRun] = {}
    edges: list[tuple[str, str]] = [(up, down) for up, down in dag.edges]
    for name, node in dag.nodes.items():
        settings = node.model_dump(
            include={"args", "priority", "timeout_seconds", "max_retries", "execution_model"},
            exclude_none=True,
        )
        if "execution_model" in settings:
            settings["execution_model"] = settings["execution_model"].value
        nodes[name] = NewRun(handler=node.handler, delay=node.delay_seconds, **settings)
        edges += [(up, name) for up in node.after]
    try:
        return dag_submission.submit_dag(conn, nodes, edges, name=dag.name)
    except dag_graph.DagError as exc:
        raise ApiError(422, str(exc), "edges") from None


def _dag_run(conn: Conn, dag_run_id: uuid.UUID) -> list[dict[str, Any]]:
    rows = conn.execute(
        query("run_reads", "run_list_by_dag"), {"dag_run_id": dag_run_id}
    ).fetchall()
    if not rows:
        raise ApiError(404, f"there is no DAG run {dag_run_id}")
    return rows


@operation(
    Role.OPERATOR,
    "Submit a run",
    body=RunIn,
    response=SubmittedOut,
    status=201,
    also=(200, 404, 409),
    description="201 with a new run; 200 with the existing run when its idempotency key "
    "was used before with the same payload; 409 when with another payload.",
)
async def submit(api: ApiCall) -> Response:
    created, row = await call(api.request, _submit, api.body)
    out = SubmittedOut(created=created, run=RunOut.model_validate(row))
    return json_response(out, 201 if created else 200)


@operation(
    Role.OPERATOR,
    "Submit many runs in one transaction",
    body=RunBatchIn,
    response=BatchOut,
    status=201,
    also=(404, 409),
)
async def submit_batch(api: ApiCall) -> Response:
    submitted = await call(api.request, _submit_many, api.body.runs)
    out = BatchOut(runs=[SubmittedIdOut(id=s.id, created=s.created) for s in submitted])
    return json_response(out, 201)


@operation(Role.VIEWER, "List runs, newest first", query=RunPageQuery, response=RunPageOut,
           also=(404,))  # fmt: skip
async def index(api: ApiCall) -> Response:
    page = await call(api.request, _page, api.query)
    return json_response(RunPageOut.model_validate(page))


@operation(Role.VIEWER, "A run with its attempts", path={"run_id": int}, response=RunDetailOut,
           also=(404,))  # fmt: skip
async def show(api: ApiCall) -> Response:
    row = await call(api.request, _run_with_attempts, api.path["run_id"])
    return json_response(RunDetailOut.model_validate(row))


@operation(
    Role.VIEWER,
    "A run's history: every transition with its time, who made it and what it means",
    path={"run_id": int},
    response=RunEventsOut,
    also=(404,),
    description="Built from the run, its attempts, the audit log and its services' circuit "
    "breakers, oldest first. An actor the records cannot name is `unknown`.",
)
async def events(api: ApiCall) -> Response:
    return json_response(await call(api.request, _events, api.path["run_id"]))


@operation(
    Role.OPERATOR,
    "Cancel a run (a running one is stopped by its worker)",
    path={"run_id": int},
    response=CancelOut,
    also=(404, 409),
)
async def cancel(api: ApiCall) -> Response:
    status, row = await call(api.request, _cancel, api.path["run_id"], api.actor)
    return json_response(CancelOut.model_validate({"status": status, "run": row}))


@operation(
    Role.OPERATOR,
    "Queue a failed, timed out or cancelled run again",
    path={"run_id": int},
    response=RetryOut,
    also=(404, 409),
)
async def retry(api: ApiCall) -> Response:
    unskipped, row = await call(api.request, _retry, api.path["run_id"], api.actor)
    return json_response(RetryOut.model_validate({"run": row, "unskipped": unskipped}))


@operation(Role.OPERATOR, "Submit a DAG of runs", body=DagIn, response=DagOut, status=201)
async def submit_dag(api: ApiCall) -> Response:
    dag = await call(api.request, _submit_dag, api.body)
    out = DagOut(dag_run_id=dag.id, runs=dag.run_ids)
    return json_response(out, 201)


@operation(Role.VIEWER, "The runs of a DAG run", path={"dag_run_id": uuid.UUID},
           response=DagRunOut, also=(404,))  # fmt: skip
async def show_dag(api: ApiCall) -> Response:
    dag_run_id = api.path["dag_run_id"]
    rows = await call(api.request, _dag_run, dag_run_id)
    return json_response(DagRunOut.model_validate({"dag_run_id": dag_run_id, "runs": rows}))


def _timeline(conn: Conn, dag_run_id: uuid.UUID) -> dict[str, Any]:
    chart = dag_timeline.load(conn, dag_run_id)
    if chart is None:
        raise ApiError(404, f"there is no DAG run {dag_run_id}")
    steps = [
        {
            "name": bar.name, "run_id": bar.run_id, "status": bar.status,
            "upstreams": list(bar.upstreams), "on_longest_chain": bar.critical,
            "waited_seconds": bar.total("waiting"), "queued_seconds": bar.total("queued"),
            "ran_seconds": bar.total("ran") + bar.total("failed") + bar.total("paused"),
            "retry_wait_seconds": bar.total("retrying"), "attempts": bar.attempts,
            "retries": bar.retries, "failed_attempts": bar.failed_attempts,
            "segments": [
                {"kind": s.kind, "start": s.start, "end": s.end, "seconds": s.seconds,
                 "attempt": s.attempt, "outcome": s.outcome, "open": s.open}
                for s in bar.segments
            ],
        }
        for bar in chart.bars
    ]  # fmt: skip
    return {"dag_run_id": dag_run_id, "start": chart.start, "end": chart.end,
            "seconds": chart.seconds, "live": chart.live,
            "longest_chain": list(chart.critical_path), "steps": steps}  # fmt: skip


@operation(
    Role.VIEWER,
    "Where the time of a DAG run went",
    path={"dag_run_id": uuid.UUID},
    response=DagTimelineOut,
    also=(404,),
    description="Each step's time cut into segments (waiting for its upstreams, queued, "
    "each attempt, waiting to retry) and the chain of steps that decided when it ended.",
)
async def dag_timeline_show(api: ApiCall) -> Response:
    found = await call(api.request, _timeline, api.path["dag_run_id"])
    return json_response(DagTimelineOut.model_validate(found))


routes = [
    Route(f"{PREFIX}/runs", submit, methods=["POST"], name="api_runs_submit"),
    Route(f"{PREFIX}/runs", index, methods=["GET"], name="api_runs_index"),
    Route(f"{PREFIX}/runs/batch", submit_batch, methods=["POST"], name="api_runs_batch"),
    Route(f"{PREFIX}/runs/{{run_id:int}}", show, methods=["GET"], name="api_runs_show"),
    Route(f"{PREFIX}/runs/{{run_id:int}}/events", events, methods=["GET"], name="api_runs_events"),
    Route(f"{PREFIX}/runs/{{run_id:int}}/cancel", cancel, methods=["POST"], name="api_runs_cancel"),
    Route(f"{PREFIX}/runs/{{run_id:int}}/retry", retry, methods=["POST"], name="api_runs_retry"),
    Route(f"{PREFIX}/dags", submit_dag, methods=["POST"], name="api_dags_submit"),
    Route(f"{PREFIX}/dags/{{dag_run_id}}", show_dag, methods=["GET"], name="api_dags_show"),
    Route(
        f"{PREFIX}/dags/{{dag_run_id}}/timeline",
        dag_timeline_show,
        methods=["GET"],
        name="api_dags_timeline",
    ),
]
