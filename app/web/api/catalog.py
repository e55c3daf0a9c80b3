"""Jobs and workflows over the API: list, read, create, change, delete, and start a job or
a workflow now with chosen arguments — through `app.catalog.job_definitions`,
`app.catalog.hand_runs` and `app.catalog.workflows`, the functions the CLI and the pages
call; they audit each change in the same transaction as the change.

As on the pages, only an admin may create or change a job that runs a dangerous handler
(`job_definitions.DANGEROUS_HANDLERS`): others get 403."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.routing import Route

from app.catalog import hand_runs, job_definitions, workflows
from app.catalog.job_definitions import DANGEROUS_HANDLERS, JobError
from app.catalog.job_fields import JobSpec
from app.catalog.workflows import WorkflowError, WorkflowSpec
from app.core.db import Conn
from app.dags.workflow_shapes import Step
from app.observability import job_durations
from app.people.roles import Role
from app.runs import run_reads
from app.web.api.core import PREFIX, ApiCall, ApiError, json_response, operation
from app.web.api.schemas import (
    DagOut,
    DeletedOut,
    DeleteQuery,
    JobChangedOut,
    JobChanges,
    JobDurationsOut,
    JobIn,
    JobListOut,
    JobOut,
    JobRunIn,
    RunOut,
    WorkflowIn,
    WorkflowListOut,
    WorkflowOut,
    WorkflowRunIn,
    WorkflowShapeIn,
)
from app.web.database import call


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


def _exists(conn: Conn, look: Any, name: str) -> bool:
    try:
        look(conn, name)
    except (JobError, WorkflowError):
        return False
    return True


def _refuse_dangerous(api: ApiCall, *handlers: str) -> None:
    """403 when a non-admin would create or change a job running a dangerous handler."""
    for handler in handlers:
        if handler in DANGEROUS_HANDLERS and not api.principal.user.may(Role.ADMIN):
            raise ApiError(403, f"only an admin may create or change a job that runs "
                           f"{handler!r}", "handler")  # fmt: skip


def _create_job(conn: Conn, api: ApiCall) -> tuple[list[str], dict[str, Any]]:
    given: JobIn = api.body
    spec = JobSpec.model_construct(**given.model_dump(mode="json", exclude_none=True))
    _refuse_dangerous(api, spec.handler)
    with conn.transaction():
        if _exists(conn, job_definitions.get, spec.name.strip()):
            raise ApiError(409, f"a job named {spec.name.strip()!r} already exists", "name")
        warnings = job_definitions.create(conn, spec, actor=api.actor)
        return warnings, job_definitions.get(conn, spec.name.strip())


def _update_job(conn: Conn, api: ApiCall, name: str) -> tuple[list[str], dict[str, Any]]:
    changes = api.body.model_dump(mode="json", exclude_unset=True)
    if not changes:
        raise ApiError(422, "give at least one field to change", "body")
    if any(value is None for value in changes.values()):
        field = next(k for k, v in changes.items() if v is None)
        raise ApiError(422, f"{field} cannot be null", field)
    with conn.transaction():
        before = _job(conn, name)
        values = {k: before[k] for k in ("name", "handler", "args", "execution_model",
                                         "priority", "timeout_seconds", "max_retries",
                                         "max_crashes", "queue", "dependencies")}  # fmt: skip
        spec = JobSpec.model_construct(**{**values, **changes})
        _refuse_dangerous(api, before["handler"], spec.handler)
        renamed = spec.name.strip()
        if renamed != name and _exists(conn, job_definitions.get, renamed):
            raise ApiError(409, f"a job named {renamed!r} already exists", "name")
        warnings = job_definitions.update(conn, name, spec, actor=api.actor)
        return warnings, job_definitions.get(conn, renamed)


def _delete(conn: Conn, look: Any, remove: Any, name: str, api: ApiCall) -> list[str]:
    """404 for an unknown name; 409 when something still uses it (the domain's reason)."""
    with conn.transaction():
        try:
            look(conn, name)
        except (JobError, WorkflowError) as exc:
            raise ApiError(404, str(exc)) from None
        try:
            deleted: list[str] = remove(
                conn, name, actor=api.actor, with_schedules=api.query.with_schedules
            )
        except (JobError, WorkflowError) as exc:
            raise ApiError(409, str(exc)) from None
    return deleted


def _workflow_spec(name: str, given: WorkflowShapeIn) -> WorkflowSpec:
    steps = {step: Step(s.job, s.args) for step, s in given.steps.items()}
    edges = [(up, step) for step, s in given.steps.items() for up in s.after]
    edges += [(up, down) for up, down in given.edges]
    return WorkflowSpec(name, steps, edges, given.description)


def _define_workflow(conn: Conn, api: ApiCall, name: str, replace: bool) -> dict[str, Any]:
    spec = _workflow_spec(name, api.body)
    with conn.transaction():
        exists = _exists(conn, workflows.show, name)
        if exists and not replace:
            raise ApiError(409, f"a workflow named {name!r} already exists", "name")
        if replace and not exists:
            raise ApiError(404, f"there is no workflow named {name!r}")
        workflows.define(conn, spec, actor=api.actor, replace=replace)
        return workflows.show(conn, name)


def _run_workflow(conn: Conn, name: str, actor: str, args: dict[str, dict[str, Any]] | None) -> Any:
    _workflow(conn, name)  # 404 for a workflow that is not there
    try:
        return workflows.run_now(conn, name, actor=actor, args=args)  # audited there
    except WorkflowError as exc:
        raise ApiError(422, str(exc), exc.field) from None


def _run_job(conn: Conn, name: str, actor: str, args: dict[str, Any] | None) -> Any:
    _job(conn, name)  # 404 for a job that is not there
    run_id = hand_runs.start_job(conn, name, args, actor=actor)  # audited there
    return run_reads.run(conn, run_id)


@operation(Role.VIEWER, "List job definitions", response=JobListOut)
async def jobs_index(api: ApiCall) -> Response:
    rows = await call(api.request, job_definitions.list_all)
    return json_response(JobListOut.model_validate({"jobs": rows}))


@operation(Role.VIEWER, "A job definition", path={"name": str}, response=JobOut, also=(404,))
async def jobs_show(api: ApiCall) -> Response:
    row = await call(api.request, _job, api.path["name"])
    return json_response(JobOut.model_validate(row))


def _durations(conn: Conn, name: str) -> dict[str, Any]:
    trend = job_durations.durations(conn, _job(conn, name)["id"])
    return {
        "job": name, "since": trend.since, "through": trend.through,
        "hours": [{"hour": h.hour, "runs": h.runs, "p50_seconds": h.p50,
                   "p95_seconds": h.p95} for h in trend.hours],
        "slowest": [{"run_id": r.run_id, "status": r.status, "attempt": r.attempt,
                     "started_at": r.started_at, "finished_at": r.finished_at,
                     "seconds": r.seconds} for r in trend.slowest],
    }  # fmt: skip


@operation(
    Role.VIEWER,
    "How long a job's runs took over the last week",
    path={"name": str},
    response=JobDurationsOut,
    also=(404,),
    description="p50 and p95 of the run duration per hour (within ±2.2 %), and the 10 "
    "slowest runs; runs count by the hour they ended, once that minute has closed.",
)
async def jobs_durations(api: ApiCall) -> Response:
    found = await call(api.request, _durations, api.path["name"])
    return json_response(JobDurationsOut.model_validate(found))


@operation(Role.EDITOR, "Create a job definition", body=JobIn, response=JobChangedOut,
           status=201, also=(409,))  # fmt: skip
async def jobs_create(api: ApiCall) -> Response:
    warnings, row = await call(api.request, _create_job, api)
    return json_response(JobChangedOut(job=JobOut.model_validate(row), warnings=warnings), 201)


@operation(Role.EDITOR, "Change a job definition (its name too)", path={"name": str},
           body=JobChanges, response=JobChangedOut, also=(404, 409))  # fmt: skip
async def jobs_update(api: ApiCall) -> Response:
    warnings, row = await call(api.request, _update_job, api, api.path["name"])
    return json_response(JobChangedOut(job=JobOut.model_validate(row), warnings=warnings))


@operation(Role.EDITOR, "Delete a job definition", path={"name": str}, query=DeleteQuery,
           response=DeletedOut, also=(404, 409),
           description="Refused (409) while a workflow uses it, and while schedules run it "
           "unless with_schedules=true.")  # fmt: skip
async def jobs_delete(api: ApiCall) -> Response:
    name = api.path["name"]
    deleted = await call(api.request, _delete, job_definitions.get, job_definitions.delete,
                         name, api)  # fmt: skip
    return json_response(DeletedOut(schedules_deleted=deleted))


@operation(Role.VIEWER, "List workflows", response=WorkflowListOut)
async def workflows_index(api: ApiCall) -> Response:
    rows = await call(api.request, workflows.list_all)
    return json_response(WorkflowListOut.model_validate({"workflows": rows}))


@operation(Role.VIEWER, "A workflow: its steps and edges", path={"name": str},
           response=WorkflowOut, also=(404,))  # fmt: skip
async def workflows_show(api: ApiCall) -> Response:
    doc = await call(api.request, _workflow, api.path["name"])
    return json_response(WorkflowOut.model_validate(doc))


@operation(Role.EDITOR, "Create a workflow", body=WorkflowIn, response=WorkflowOut,
           status=201, also=(404, 409))  # fmt: skip
async def workflows_create(api: ApiCall) -> Response:
    doc = await call(api.request, _define_workflow, api, api.body.name, False)
    return json_response(WorkflowOut.model_validate(doc), 201)


@operation(Role.EDITOR, "Redefine a workflow: its description, steps and edges",
           path={"name": str}, body=WorkflowShapeIn, response=WorkflowOut,
           also=(404,))  # fmt: skip
async def workflows_update(api: ApiCall) -> Response:
    doc = await call(api.request, _define_workflow, api, api.path["name"], True)
    return json_response(WorkflowOut.model_validate(doc))


@operation(Role.EDITOR, "Delete a workflow (its past DAG runs stay)", path={"name": str},
           query=DeleteQuery, response=DeletedOut, also=(404, 409),
           description="Refused (409) while schedules run it unless "
           "with_schedules=true.")  # fmt: skip
async def workflows_delete(api: ApiCall) -> Response:
    name = api.path["name"]
    deleted = await call(api.request, _delete, workflows.show, workflows.delete, name, api)
    return json_response(DeletedOut(schedules_deleted=deleted))


@operation(Role.OPERATOR, "Start a job now (one run) with chosen arguments",
           path={"name": str}, body=JobRunIn, response=RunOut, status=201, also=(404,),
           description="The run has the job's settings; its arguments are checked against "
           "the schema the job's handler declares (422 naming the argument at fault, "
           "nothing started). Audited as job.run.")  # fmt: skip
async def jobs_run(api: ApiCall) -> Response:
    row = await call(api.request, _run_job, api.path["name"], api.actor, api.body.args)
    return json_response(RunOut.model_validate(row), 201)


@operation(Role.OPERATOR, "Run a workflow now (one DAG run), optionally with chosen "
           "arguments for some steps", path={"name": str}, body=WorkflowRunIn,
           response=DagOut, status=201, also=(404,))  # fmt: skip
async def workflows_run(api: ApiCall) -> Response:
    name = api.path["name"]
    dag = await call(api.request, _run_workflow, name, api.actor, api.body.args)
    out = DagOut(dag_run_id=dag.id, runs=dag.run_ids)
    return json_response(out, 201)


routes = [
    Route(f"{PREFIX}/jobs", jobs_index, methods=["GET"], name="api_jobs_index"),
    Route(f"{PREFIX}/jobs", jobs_create, methods=["POST"], name="api_jobs_create"),
    Route(f"{PREFIX}/jobs/{{name}}", jobs_show, methods=["GET"], name="api_jobs_show"),
    Route(
        f"{PREFIX}/jobs/{{name}}/durations",
        jobs_durations,
        methods=["GET"],
        name="api_jobs_durations",
    ),
    Route(f"{PREFIX}/jobs/{{name}}", jobs_update, methods=["PATCH"], name="api_jobs_update"),
    Route(f"{PREFIX}/jobs/{{name}}", jobs_delete, methods=["DELETE"], name="api_jobs_delete"),
    Route(f"{PREFIX}/jobs/{{name}}/runs", jobs_run, methods=["POST"], name="api_jobs_run"),
    Route(f"{PREFIX}/workflows", workflows_index, methods=["GET"], name="api_workflows_index"),
    Route(f"{PREFIX}/workflows", workflows_create, methods=["POST"], name="api_workflows_create"),
    Route(
        f"{PREFIX}/workflows/{{name}}", workflows_show, methods=["GET"], name="api_workflows_show"
    ),
    Route(
        f"{PREFIX}/workflows/{{name}}",
        workflows_update,
        methods=["PUT"],
        name="api_workflows_update",
    ),
    Route(
        f"{PREFIX}/workflows/{{name}}",
        workflows_delete,
        methods=["DELETE"],
        name="api_workflows_delete",
    ),
    Route(
        f"{PREFIX}/workflows/{{name}}/runs",
        workflows_run,
        methods=["POST"],
        name="api_workflows_run",
    ),
]
