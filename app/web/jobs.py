"""Jobs pages: list, create, show/edit, delete — through `app.job_definitions`."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app import job_definitions
from app.job_definitions import JobError, JobSpec
from app.states import ExecutionModel, Role
from app.web.access import current_user, requires
from app.web.database import Conn, call
from app.web.render import redirect, render


def _url(name: str) -> str:
    return f"/jobs/{quote(name, safe='')}"


def _form_values(form: FormData) -> dict[str, str]:
    fields = ("name", "handler", "args", "execution_model", "priority", "timeout_seconds",
              "max_retries")  # fmt: skip
    return {f: str(form.get(f, "")).strip() for f in fields}


def _whole(values: dict[str, str], field: str, label: str) -> int:
    try:
        return int(values[field])
    except ValueError:
        raise JobError(f"{label} must be a whole number", field) from None


def _spec(values: dict[str, str]) -> JobSpec:
    return JobSpec(
        name=values["name"],
        handler=values["handler"],
        args=job_definitions.parse_args(values["args"]),
        execution_model=values["execution_model"],
        priority=_whole(values, "priority", "priority"),
        timeout_seconds=_whole(values, "timeout_seconds", "timeout"),
        max_retries=_whole(values, "max_retries", "retries"),
    )


def _values_of(row: dict[str, Any]) -> dict[str, str]:
    return {
        "name": row["name"],
        "handler": row["handler"],
        "args": json.dumps(row["args"], indent=2),
        "execution_model": row["execution_model"],
        "priority": str(row["priority"]),
        "timeout_seconds": str(row["timeout_seconds"]),
        "max_retries": str(row["max_retries"]),
    }


def _new_values() -> dict[str, str]:
    return _values_of({**_spec_defaults(), "name": "", "handler": "", "args": {}})


def _spec_defaults() -> dict[str, Any]:
    spec = JobSpec("", "")
    return {
        "execution_model": spec.execution_model,
        "priority": spec.priority,
        "timeout_seconds": spec.timeout_seconds,
        "max_retries": spec.max_retries,
    }


def _form_context(request: Request, conn_values: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"models": [m.value for m in ExecutionModel], **conn_values, **extra}


def _index_page(conn: Conn) -> dict[str, Any]:
    return {"jobs": job_definitions.list_all(conn)}


def _show_page(conn: Conn, name: str) -> dict[str, Any]:
    try:
        job = job_definitions.get(conn, name)
    except JobError:
        raise HTTPException(404, f"There is no job named {name!r}.") from None
    return {"job": job, "handlers": job_definitions.handler_choices(conn)}


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    return render(
        request, "jobs/index.html", "jobs/_table.html", **await call(request, _index_page)
    )


@requires(Role.EDITOR)
async def new(request: Request) -> Response:
    handlers = await call(request, job_definitions.handler_choices)
    return render(
        request,
        "jobs/new.html",
        values=_new_values(),
        errors={},
        **_form_context(request, {"handlers": handlers}),
    )


async def _save(request: Request, name: str | None) -> Response:
    form = await request.form()
    values = _form_values(form)
    user = current_user(request)
    try:
        spec = _spec(values)
        if name is None:
            warnings = await call(
                request,
                job_definitions.create,
                spec,
                actor=user.username,
                allow_dangerous=user.may(Role.ADMIN),
            )
        else:
            warnings = await call(
                request,
                job_definitions.update,
                name,
                spec,
                actor=user.username,
                allow_dangerous=user.may(Role.ADMIN),
            )
    except JobError as exc:
        handlers = await call(request, job_definitions.handler_choices)
        errors = {exc.field or "form": str(exc)}
        page = "jobs/new.html" if name is None else "jobs/show.html"
        extra: dict[str, Any] = {}
        if name is not None:
            extra = await call(request, _show_page, name)
        return render(
            request,
            page,
            "jobs/_form.html",
            status_code=422,
            values=values,
            errors=errors,
            editing=name,
            **_form_context(request, {"handlers": handlers, **extra}),
        )
    location = _url(spec.name.strip())
    if warnings:
        location += "?warning=" + quote(warnings[0])
    return redirect(request, location)


@requires(Role.EDITOR)
async def create(request: Request) -> Response:
    return await _save(request, None)


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    name = request.path_params["name"]
    page = await call(request, _show_page, name)
    return render(
        request,
        "jobs/show.html",
        values=_values_of(page["job"]),
        errors={},
        editing=name,
        warning=request.query_params.get("warning"),
        **_form_context(request, page),
    )


@requires(Role.EDITOR)
async def update(request: Request) -> Response:
    return await _save(request, request.path_params["name"])


@requires(Role.EDITOR)
async def delete(request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    user = current_user(request)
    try:
        await call(
            request,
            job_definitions.delete,
            name,
            actor=user.username,
            with_schedules=form.get("with_schedules") == "yes",
        )
    except JobError as exc:
        page = await call(request, _show_page, name)
        return render(
            request,
            "jobs/show.html",
            status_code=409,
            values=_values_of(page["job"]),
            errors={},
            editing=name,
            delete_error=str(exc),
            **_form_context(request, page),
        )
    return redirect(request, "/jobs")


routes = [
    Route("/jobs", index, methods=["GET"], name="jobs_index"),
    Route("/jobs", create, methods=["POST"], name="jobs_create"),
    Route("/jobs/new", new, methods=["GET"], name="jobs_new"),
    Route("/jobs/{name:path}/delete", delete, methods=["POST"], name="jobs_delete"),
    Route("/jobs/{name:path}", show, methods=["GET"], name="jobs_show"),
    Route("/jobs/{name:path}", update, methods=["POST"], name="jobs_update"),
]
