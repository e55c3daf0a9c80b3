"""Jobs pages: list, create, show/edit, delete — through `app.catalog.job_definitions`.

A job's page also shows how long its runs took over the last week (p50/p95 per hour as a
chart, and the slowest runs) — through `app.observability.job_durations`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData, QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.catalog import hand_runs, job_definitions
from app.catalog.job_definitions import JobError
from app.catalog.job_fields import JobSpec
from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError
from app.core.limits import DEFAULT_QUEUE
from app.handlers import handler_args
from app.handlers.execution_models import ExecutionModel
from app.handlers.gate import HandlerDisabled
from app.observability import job_durations
from app.people import versions
from app.people.roles import Role
from app.web import history
from app.web.access import current_user, requires
from app.web.charts import LineChart, line_chart
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import duration, redirect, render

FIELDS = ("name", "handler", "args", "execution_model", "priority", "timeout_seconds",
          "max_retries", "max_crashes", "queue", "dependencies")  # fmt: skip
MODELS = [m.value for m in ExecutionModel]


def _url(name: str) -> str:
    return f"/jobs/{quote(name, safe='')}"


def _whole(values: dict[str, str], field: str, label: str) -> int:
    try:
        return int(values[field])
    except ValueError:
        raise JobError(f"{label} must be a whole number", field) from None


def _spec(values: dict[str, str], args: dict[str, Any]) -> JobSpec:
    return JobSpec.model_construct(
        name=values["name"],
        handler=values["handler"],
        args=args,
        # as posted: the catalogue refuses an unknown one in a person's words
        execution_model=values["execution_model"],  # type: ignore[arg-type]
        priority=_whole(values, "priority", "priority"),
        timeout_seconds=_whole(values, "timeout_seconds", "timeout"),
        max_retries=_whole(values, "max_retries", "retries"),
        # left empty (or posted by a form from before the field): the default
        max_crashes=_whole(values, "max_crashes", "crashes before quarantine")
        if values["max_crashes"]
        else limits.DEFAULT_MAX_CRASHES,
        # left empty (or posted by a form from before the field): the default queue
        queue=values["queue"] or DEFAULT_QUEUE,
        dependencies=_services(values["dependencies"]),
    )


def _services(text: str) -> list[str]:
    """The services box (one a line, or comma-separated) as names; the catalogue checks them."""
    return [name.strip() for line in text.splitlines() for name in line.split(",")
            if name.strip()]  # fmt: skip


def _blank() -> dict[str, Any]:
    """A new job's fields, at their defaults."""
    return JobSpec.model_construct(name="", handler="").values()


def _form_values(form: FormData) -> dict[str, str]:
    return {f: str(form.get(f, "")).strip() for f in FIELDS}


def _arg_values(form: FormData) -> dict[str, str]:
    """The posted fields of a handler's declared args, by property name."""
    return {k.removeprefix("args."): str(v) for k, v in form.multi_items() if k.startswith("args.")}


def _read_args(
    conn: Conn, args_for: str, arg_values: dict[str, str], json_text: str
) -> dict[str, Any]:
    """Args from the fields of `args_for`'s declared schema if they were shown, else from
    the JSON editor."""
    schema = job_definitions.args_schema(conn, args_for) if args_for else None
    if schema is None:
        return job_definitions.parse_args(json_text)
    try:
        return handler_args.from_form(schema, arg_values)
    except handler_args.ArgsError as exc:
        raise JobError(str(exc), f"args.{exc.name}") from None


def _values_of(row: dict[str, Any]) -> dict[str, str]:
    """A job (row or spec) as the form shows it."""
    return {f: _shown(f, row[f]) for f in FIELDS}


def _shown(field: str, value: Any) -> str:
    if field == "args":
        return json.dumps(value, indent=2)
    if field == "dependencies":
        return "\n".join(value or [])
    return str(value)


def _index_page(conn: Conn, params: QueryParams) -> dict[str, Any]:
    q = params.get("q") or None
    after = params.get("after") or None
    page = job_definitions.page(conn, q, after)
    return {"jobs": page.rows, **page.links("/jobs", {"q": q} if q else {}, after)}


def _form_page(
    conn: Conn, name: str | None, handler: str | None = None, args: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What the new-job page (`name` None) or a job's page shows besides the form values:
    the fields of `handler`'s declared args (the job's own when None) filled from `args`."""
    page: dict[str, Any] = {
        "handlers": job_definitions.handler_choices(conn),
        "admin_only": job_definitions.DANGEROUS_HANDLERS,
        "models": MODELS,
    }
    if name is not None:
        try:
            page["job"] = job_definitions.get(conn, name)
        except JobError:
            raise HTTPException(404, f"There is no job named {name!r}.") from None
        if handler is None:
            handler, args = page["job"]["handler"], page["job"]["args"]
    schema = job_definitions.args_schema(conn, handler) if handler else None
    page["arg_fields"] = handler_args.fields(schema) if schema is not None else None
    page["arg_values"] = handler_args.form_values(schema, args or {}) if schema else {}
    return page


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    page = await call(request, _index_page, request.query_params)
    return render(request, "jobs/index.html", "jobs/_table.html", filters=request.query_params,
                  **page)  # fmt: skip


@requires(Role.EDITOR)
async def new(request: Request) -> Response:
    page = await call(request, _form_page, None)
    values = _values_of(_blank())
    return render(request, "jobs/new.html", values=values, errors={}, **page)


@requires(Role.EDITOR)
async def args_fields(request: Request) -> Response:
    """The args part of the job form for the handler picked (htmx swaps it in on change)."""
    handler = request.query_params.get("handler", "")
    page = await call(request, _form_page, None, handler)
    values = {**_values_of(_blank()), "handler": handler}
    return render(request, "jobs/new.html", "jobs/_args.html", values=values, errors={}, **page)


@requires(Role.VIEWER)
async def names(request: Request) -> Response:
    """Job names holding the text typed in a job field, as the options of its suggestion
    list (htmx swaps them in as the user types). The field sends its own value under its
    own name (`job`, `step_job`), or `q`."""
    params = request.query_params
    text = params.get("q") or params.get("job") or params.get("step_job") or ""
    found = await call(request, job_definitions.names_matching, text)
    return render(request, "jobs/_name_options.html", names=found)


def duration_chart(trend: job_durations.Durations) -> LineChart:
    """The week's hourly p50/p95 as a line chart, each hour at its middle; a line stops
    at an hour without runs."""
    half = timedelta(minutes=30)
    points = [(h.hour + half, {"p50": h.p50, "p95": h.p95}) for h in trend.hours]
    end = trend.since + timedelta(days=job_durations.DAYS)
    return line_chart(
        points, ["p50", "p95"], trend.since, end,
        before_end=lambda seconds: f"-{duration(seconds)}", gap=timedelta(hours=1),
    )  # fmt: skip


def _show_page(conn: Conn, name: str) -> dict[str, Any]:
    page = _form_page(conn, name)
    trend = job_durations.durations(conn, page["job"]["id"])
    return {**page, "durations": trend, "duration_chart": duration_chart(trend)}


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    name = request.path_params["name"]
    page = await call(request, _show_page, name)
    warning = request.query_params.get("warning")
    return render(
        request, "jobs/show.html", values=_values_of(page["job"]), errors={}, editing=name,
        warning=warning, **page,
    )  # fmt: skip


async def _save(request: Request, name: str | None) -> Response:
    """Create (`name` None) or update; the form again with the error next to its field."""
    form = await request.form()
    values, arg_values = _form_values(form), _arg_values(form)
    args_for = str(form.get("args_for", ""))
    user = current_user(request)
    actor, admin = user.username, user.may(Role.ADMIN)
    args: dict[str, Any] | None = None
    try:
        args = await call(request, _read_args, args_for, arg_values, values["args"])
        if args_for and args_for != values["handler"]:  # picked without JS: show its fields
            raise JobError("The handler changed: check its arguments, then save again.", "args")
        spec = _spec(values, args)
        if name is None:
            warnings = await call(
                request, job_definitions.create, spec, actor=actor, allow_dangerous=admin
            )
        else:
            warnings = await call(
                request, job_definitions.update, name, spec, actor=actor, allow_dangerous=admin
            )
    except JobError as exc:
        page = await call(request, _form_page, name, values["handler"], args)
        if args_for and args_for == values["handler"]:
            page["arg_values"] = arg_values  # what the person typed, as typed
        elif args_for and args is not None:  # fields of another handler: show them as JSON
            values["args"] = json.dumps(args, indent=2)
        return render(
            request, "jobs/new.html" if name is None else "jobs/show.html", "jobs/_form.html",
            status_code=422, values=values, errors=field_errors(exc),
            editing=name, **page,
        )  # fmt: skip
    location = _url(spec.name.strip())
    if warnings:
        location += "?warning=" + quote(warnings[0])
    return redirect(request, location)


@requires(Role.EDITOR)
async def create(request: Request) -> Response:
    return await _save(request, None)


@requires(Role.EDITOR)
async def update(request: Request) -> Response:
    return await _save(request, request.path_params["name"])


@requires(Role.EDITOR)
async def delete(request: Request) -> Response:
    name = request.path_params["name"]
    with_schedules = (await request.form()).get("with_schedules") == "yes"
    user = current_user(request)
    try:
        await call(
            request, job_definitions.delete, name, actor=user.username,
            with_schedules=with_schedules,
        )  # fmt: skip
    except JobError as exc:
        page = await call(request, _form_page, name)
        return render(
            request, "jobs/show.html", status_code=409, values=_values_of(page["job"]),
            errors={}, editing=name, delete_error=str(exc), **page,
        )  # fmt: skip
    return redirect(request, "/jobs")


def _run_page(conn: Conn, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the "Run now" form shows: the job, the fields of its handler's declared args
    (or the JSON editor) filled from `args`, else from its last run started by hand
    (`last`), else from the job's own args."""
    try:
        job = job_definitions.get(conn, name)
    except JobError:
        raise HTTPException(404, f"There is no job named {name!r}.") from None
    last = hand_runs.last_job_args(conn, name) if args is None else None
    if args is None:
        args = last.args if last else job["args"]
    schema = job_definitions.args_schema(conn, job["handler"])
    return {
        "job": job,
        "last": last,
        "values": {"handler": job["handler"], "args": json.dumps(args, indent=2)},
        "arg_fields": handler_args.fields(schema) if schema is not None else None,
        "arg_values": handler_args.form_values(schema, args) if schema else {},
    }


def _start(conn: Conn, name: str, form: dict[str, Any], actor: str) -> int:
    """Read the posted arguments as the form showed them and start the run."""
    handler = job_definitions.get(conn, name)["handler"]
    args_for = form["args_for"]
    if args_for and args_for != handler:
        raise JobError(
            "Someone changed this job's handler while you filled this in: check the "
            "arguments, then start again.",
            "form",
        )
    args = _read_args(conn, args_for, form["arg_values"], form["args"])
    return hand_runs.start_job(conn, name, args, actor=actor)


@requires(Role.OPERATOR)
async def run_form(request: Request) -> Response:
    page = await call(request, _run_page, request.path_params["name"])
    return render(request, "jobs/run.html", errors={}, **page)


@requires(Role.OPERATOR)
async def run(request: Request) -> Response:
    """Start one run with the arguments posted; its page next, or the form with the
    problem next to its field (nothing started)."""
    name = request.path_params["name"]
    form = await request.form()
    posted = {
        "args_for": str(form.get("args_for", "")),
        "arg_values": _arg_values(form),
        "args": str(form.get("args", "")),
    }
    try:
        run_id = await call(request, _start, name, posted, current_user(request).username)
    except (JobError, HandlerDisabled) as exc:
        page = await call(request, _run_page, name, {})
        if posted["args_for"] and page["arg_fields"] is not None:
            page["arg_values"] = posted["arg_values"]  # what the person typed, as typed
        else:
            page["values"]["args"] = posted["args"]
        status = 409 if isinstance(exc, HandlerDisabled) else 422
        return render(request, "jobs/run.html", status_code=status,
                      errors=field_errors(exc), **page)  # fmt: skip
    return redirect(request, f"/runs/{run_id}")


def _history_page(conn: Conn, name: str) -> dict[str, Any]:
    _form_page(conn, name)  # 404 for a job that is not there
    return {"entries": history.entries(conn, "job", name)}


def _rollback(conn: Conn, name: str, version: str, actor: str, admin: bool) -> None:
    """Roll back; only an admin may when the job runs, or would run, a dangerous handler."""
    if not admin:
        chosen = [v for v in versions.history(conn, "job", name) if str(v.id) == version]
        handlers = {job_definitions.get(conn, name)["handler"]}
        handlers |= {v.snapshot.get("handler") for v in chosen}
        dangerous = sorted(h for h in handlers if h in job_definitions.DANGEROUS_HANDLERS)
        if dangerous:
            raise JobError(f"only an admin may change a job that runs {dangerous[0]!r}")
    history.rollback(conn, "job", name, version, actor)


@requires(Role.VIEWER)
async def versions_page(request: Request) -> Response:
    name = request.path_params["name"]
    page = await call(request, _history_page, name)
    return render(request, "jobs/history.html", name=name, shown=history.shown, error=None,
                  **page)  # fmt: skip


@requires(Role.EDITOR)
async def rollback(request: Request) -> Response:
    name = request.path_params["name"]
    version = str((await request.form()).get("version", ""))
    user = current_user(request)
    try:
        await call(request, _rollback, name, version, user.username, user.may(Role.ADMIN))
    except UsageError as exc:
        page = await call(request, _history_page, name)
        return render(request, "jobs/history.html", status_code=422, name=name,
                      shown=history.shown, error=str(exc), **page)  # fmt: skip
    return redirect(request, _url(name) + "?warning=" + quote("Rolled back to that version."))


routes = [
    Route("/jobs", index, methods=["GET"], name="jobs_index"),
    Route("/jobs", create, methods=["POST"], name="jobs_create"),
    Route("/jobs/new", new, methods=["GET"], name="jobs_new"),
    Route("/jobs/args-fields", args_fields, methods=["GET"], name="jobs_args_fields"),
    Route("/jobs/names", names, methods=["GET"], name="jobs_names"),
    Route("/jobs/{name:path}/delete", delete, methods=["POST"], name="jobs_delete"),
    Route("/jobs/{name:path}/run", run_form, methods=["GET"], name="jobs_run_form"),
    Route("/jobs/{name:path}/run", run, methods=["POST"], name="jobs_run"),
    Route("/jobs/{name:path}/history", versions_page, methods=["GET"], name="jobs_history"),
    Route("/jobs/{name:path}/rollback", rollback, methods=["POST"], name="jobs_rollback"),
    Route("/jobs/{name:path}", show, methods=["GET"], name="jobs_show"),
    Route("/jobs/{name:path}", update, methods=["POST"], name="jobs_update"),
]
