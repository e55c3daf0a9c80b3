"""Jobs and workflows over the API: read them, and run a workflow now — through
`app.job_definitions` and `app.workflows`, the functions the CLI and the pages call."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.routing import Route

from app import job_definitions, workflows
from app.db import Conn
from app.job_definitions import JobError
from app.states import Role
from app.web.api.core import PREFIX, ApiCall, ApiError, json_response, operation
from app.web.api.schemas import (
    DagOut,
    JobListOut,
    JobOut,
    WorkflowListOut,
    WorkflowOut,
)
from app.web.database import call
from app.workflows import WorkflowError


def _job(conn: Conn, name: str) -> dict[str, Any]:
    try:
        return job_definitions.get(conn, name)
    except JobError as exc:
        raise ApiError(404, str(exc)) from None


def _workflow(conn: Conn, name: str) -> dict[str, Any]:
    try:
        return workflows.show(conn, name)
    except WorkflowError as exc:
        raise ApiError(404, str(exc)) from None


def _run_workflow(conn: Conn, name: str, actor: str) -> Any:
    try:
        return workflows.run_now(conn, name, actor=actor)  # audited by the domain function
    except WorkflowError as exc:
        raise ApiError(404, str(exc)) from None


@operation(Role.VIEWER, "List job definitions", response=JobListOut)
async def jobs_index(api: ApiCall) -> Response:
    rows = await call(api.request, job_definitions.list_all)
    return json_response(JobListOut.model_validate({"jobs": rows}))


@operation(Role.VIEWER, "A job definition", path={"name": str}, response=JobOut, also=(404,))
async def jobs_show(api: ApiCall) -> Response:
    row = await call(api.request, _job, api.path["name"])
    return json_response(JobOut.model_validate(row))


@operation(Role.VIEWER, "List workflows", response=WorkflowListOut)
async def workflows_index(api: ApiCall) -> Response:
    rows = await call(api.request, workflows.list_all)
    return json_response(WorkflowListOut.model_validate({"workflows": rows}))


@operation(Role.VIEWER, "A workflow: its steps and edges", path={"name": str},
           response=WorkflowOut, also=(404,))  # fmt: skip
async def workflows_show(api: ApiCall) -> Response:
    doc = await call(api.request, _workflow, api.path["name"])
    return json_response(WorkflowOut.model_validate(doc))


@operation(Role.OPERATOR, "Run a workflow now (one DAG run)", path={"name": str},
           response=DagOut, status=201, also=(404,))  # fmt: skip
async def workflows_run(api: ApiCall) -> Response:
    name = api.path["name"]
    dag = await call(api.request, _run_workflow, name, api.actor)
    out = DagOut(dag_run_id=dag.id, runs=dag.run_ids)
    return json_response(out, 201)


routes = [
    Route(f"{PREFIX}/jobs", jobs_index, methods=["GET"], name="api_jobs_index"),
    Route(f"{PREFIX}/jobs/{{name}}", jobs_show, methods=["GET"], name="api_jobs_show"),
    Route(f"{PREFIX}/workflows", workflows_index, methods=["GET"], name="api_workflows_index"),
    Route(f"{PREFIX}/workflows/{{name}}", workflows_show, methods=["GET"],
          name="api_workflows_show"),
    Route(f"{PREFIX}/workflows/{{name}}/runs", workflows_run, methods=["POST"],
          name="api_workflows_run"),
]  # fmt: skip
