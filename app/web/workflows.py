"""Workflows pages: list, show (the DAG as a picture), create/edit with a list of steps,
delete, run now (a form of each step's arguments) — through `app.catalog.workflows`.

The editor is one form: each step row has a name, a job and "runs after" checkboxes that
point at other rows by position, so renaming a step never breaks its edges. The form's
buttons say what to do (`op`): `save`, `add` a step, or `remove:N`; adding and removing
only redraw the form, with htmx or as a plain post. The picture follows the form while
it is edited (`preview`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.catalog import hand_runs, job_definitions, workflows
from app.catalog.job_definitions import JobError
from app.catalog.workflows import WorkflowError, WorkflowSpec
from app.core.db import Conn
from app.core.errors import UsageError
from app.dags.dag_layout import Layout, LayoutError, layout
from app.dags.workflow_shapes import Step
from app.handlers import handler_args
from app.people.roles import Role
from app.web import history
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import redirect, render

MAX_EDITOR_STEPS = 200  # larger workflows are written as JSON (`sundial workflow add`)


@dataclass(slots=True)
class Row:
    """One step as the editor holds it; `after` are positions of other rows."""

    name: str = ""
    job: str = ""
    args: str = ""
    after: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Draft:
    name: str
    description: str
    rows: list[Row]


def _url(name: str) -> str:
    return f"/workflows/{quote(name, safe='')}"


def _draft_of(form: FormData, name: str | None) -> Draft:
    names, jobs = form.getlist("step_name"), form.getlist("step_job")
    args = form.getlist("step_args")
    count = min(len(names), len(jobs), MAX_EDITOR_STEPS + 1)
    rows = []
    for i in range(count):
        picked = {int(str(v)) for v in form.getlist(f"after_{i}") if str(v).isdigit()}
        rows.append(
            Row(
                name=str(names[i]).strip(),
                job=str(jobs[i]).strip(),
                args=str(args[i]).strip() if i < len(args) else "",
                after=sorted(j for j in picked if j != i and j < count),
            )
        )
    title = name if name is not None else str(form.get("name", "")).strip()
    return Draft(title, str(form.get("description", "")).strip(), rows)


def _draft_from(workflow: dict[str, Any]) -> Draft:
    # Steps are stored unordered: list them as they run, level by level.
    edges = [(u, d) for u, d in workflow["edges"]]
    level = {n.name: n.layer for n in layout(list(workflow["steps"]), edges).nodes}
    order = sorted(workflow["steps"], key=lambda n: (level[n], n))
    position = {n: i for i, n in enumerate(order)}
    rows = [
        Row(
            name=n,
            job=s["job"],
            args=json.dumps(s["args"], indent=2) if s["args"] else "",
            after=sorted(position[u] for u, d in workflow["edges"] if d == n),
        )
        for n in order
        for s in [workflow["steps"][n]]
    ]
    return Draft(workflow["name"], workflow["description"], rows)


def _remove(rows: list[Row], gone: int) -> list[Row]:
    """The rows without row `gone`; links to it are dropped, later positions shift up."""
    kept = [r for i, r in enumerate(rows) if i != gone]
    for r in kept:
        r.after = [j - (j > gone) for j in r.after if j != gone]
    return kept


def _edges(rows: list[Row]) -> list[tuple[str, str]]:
    return [(rows[j].name, r.name) for r in rows for j in r.after if rows[j].name and r.name]


def _spec(draft: Draft) -> tuple[WorkflowSpec | None, dict[str, str]]:
    """The workflow the form describes, or the errors next to the fields at fault."""
    errors: dict[str, str] = {}
    steps: dict[str, Step] = {}
    if not draft.name:
        errors["name"] = "Give the workflow a name."
    if not draft.rows:
        errors["steps"] = "Add at least one step."
    if len(draft.rows) > MAX_EDITOR_STEPS:
        errors["steps"] = (
            f"The editor takes up to {MAX_EDITOR_STEPS} steps; write larger workflows as JSON "
            "with `sundial workflow add`."
        )
    for i, row in enumerate(draft.rows):
        if not row.name:
            errors[f"step-{i}-name"] = "Give this step a name."
        elif row.name in steps:
            errors[f"step-{i}-name"] = f"Another step is already named {row.name!r}."
        if not row.job:
            errors[f"step-{i}-job"] = "Choose the job this step runs."
        try:
            args = job_definitions.parse_args(row.args)
        except JobError as exc:
            errors[f"step-{i}-args"] = str(exc)
            args = {}
        if row.name and row.name not in steps:
            steps[row.name] = Step(row.job, args)
    if errors:
        return None, errors
    return WorkflowSpec(draft.name, steps, _edges(draft.rows), draft.description), {}


def _field_errors(exc: WorkflowError, draft: Draft) -> dict[str, str]:
    return field_errors(exc, lambda field: _form_field(field, draft))


def _form_field(field: str, draft: Draft) -> str:
    """A step's error goes to the row of that step's name."""
    if not field.startswith("step:"):
        return field
    rows = [i for i, r in enumerate(draft.rows) if r.name == field[len("step:") :]]
    return f"step-{rows[0]}-name" if rows else "steps"


def _picture(rows: list[Row]) -> tuple[Layout | None, str | None]:
    """The picture of the rows that have names so far, or why there is none."""
    named = list(dict.fromkeys(r.name for r in rows if r.name))
    if not named:
        return None, None
    edges = _edges(rows)
    message = workflows.cycle_message(named, edges)
    if message:
        return None, message
    try:
        return layout(named, edges), None
    except LayoutError as exc:
        return None, str(exc)


def _form_page(conn: Conn, name: str | None) -> dict[str, Any]:
    page: dict[str, Any] = {"jobs": job_definitions.choices(conn)}
    if name is not None:
        page["workflow"] = _detail(conn, name)
    return page


def _detail(conn: Conn, name: str) -> dict[str, Any]:
    try:
        return workflows.detail(conn, name)
    except WorkflowError:
        raise HTTPException(404, f"There is no workflow named {name!r}.") from None


def _editor(
    request: Request,
    draft: Draft,
    page: dict[str, Any],
    *,
    editing: str | None,
    errors: dict[str, str] | None = None,
    status_code: int = 200,
    focus: int | None = None,
) -> Response:
    picture, problem = _picture(draft.rows)
    return render(
        request, "workflows/edit.html" if editing else "workflows/new.html",
        "workflows/_form.html", status_code=status_code, draft=draft, errors=errors or {},
        editing=editing, picture=picture, problem=problem, focus=focus, **page,
    )  # fmt: skip


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    rows = await call(request, workflows.list_all)
    return render(request, "workflows/index.html", "workflows/_table.html", workflows=rows)


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    workflow = await call(request, _detail, request.path_params["name"])
    steps = list(workflow["steps"])
    picture = layout(steps, [(u, d) for u, d in workflow["edges"]])
    last = workflow["last_run"]
    status_of = {s: v["status"] for s, v in last["steps"].items()} if last else {}
    return render(
        request, "workflows/show.html", workflow=workflow, picture=picture,
        status_of=status_of, upstreams=picture.upstreams(),
        rolled_back=request.query_params.get("rolled_back"),
    )  # fmt: skip


@requires(Role.EDITOR)
async def new(request: Request) -> Response:
    page = await call(request, _form_page, None)
    return _editor(request, Draft("", "", [Row()]), page, editing=None)


@requires(Role.EDITOR)
async def edit(request: Request) -> Response:
    name = request.path_params["name"]
    page = await call(request, _form_page, name)
    draft = _draft_from(page["workflow"])
    if len(draft.rows) > MAX_EDITOR_STEPS:
        return render(request, "workflows/edit.html", editing=name, too_large=len(draft.rows),
                      limit=MAX_EDITOR_STEPS)  # fmt: skip
    return _editor(request, draft, page, editing=name)


async def _save(request: Request, name: str | None) -> Response:
    """Create (`name` None) or replace, or only add/remove a step row and redraw."""
    form = await request.form()
    draft = _draft_of(form, name)
    op = str(form.get("op", "save"))
    page = await call(request, _form_page, name)
    if op == "add":
        draft.rows.append(Row())
        return _editor(request, draft, page, editing=name, focus=len(draft.rows) - 1)
    if op.startswith("remove:") and op[len("remove:") :].isdigit():
        draft.rows = _remove(draft.rows, int(op[len("remove:") :]))
        return _editor(request, draft, page, editing=name)
    spec, errors = _spec(draft)
    if spec is not None:
        try:
            await call(
                request, workflows.define, spec, actor=current_user(request).username,
                replace=name is not None,
            )  # fmt: skip
            return redirect(request, _url(spec.name))
        except WorkflowError as exc:
            errors = _field_errors(exc, draft)
        except UsageError as exc:  # a step's job runs a handler the fleet turned off
            errors = {"steps": str(exc)}
    return _editor(request, draft, page, editing=name, errors=errors, status_code=422)


@requires(Role.EDITOR)
async def create(request: Request) -> Response:
    return await _save(request, None)


@requires(Role.EDITOR)
async def update(request: Request) -> Response:
    name = request.path_params["name"]
    await call(request, _detail, name)  # 404 for a workflow that is not there
    return await _save(request, name)


@requires(Role.EDITOR)
async def preview(request: Request) -> Response:
    """The picture of the form as it stands (htmx, while editing); saves nothing."""
    picture, problem = _picture(_draft_of(await request.form(), None).rows)
    return render(request, "workflows/_preview.html", picture=picture, problem=problem)


@requires(Role.EDITOR)
async def delete(request: Request) -> Response:
    name = request.path_params["name"]
    with_schedules = (await request.form()).get("with_schedules") == "yes"
    try:
        await call(
            request, workflows.delete, name, actor=current_user(request).username,
            with_schedules=with_schedules,
        )  # fmt: skip
    except WorkflowError as exc:
        workflow = await call(request, _detail, name)
        picture = layout(list(workflow["steps"]), [(u, d) for u, d in workflow["edges"]])
        return render(
            request, "workflows/show.html", status_code=409, workflow=workflow,
            picture=picture, status_of={}, upstreams=picture.upstreams(),
            delete_error=str(exc),
        )  # fmt: skip
    return redirect(request, "/workflows")


@dataclass(slots=True)
class StepArgs:
    """One step's part of the "Run now" form: the fields of its handler's declared args
    (None: a JSON editor) and what they hold."""

    index: int
    name: str
    job: str
    handler: str
    fields: list[handler_args.ArgField] | None
    values: dict[str, str]
    json: str


def _step_args(
    conn: Conn, index: int, name: str, step: hand_runs.StepDefaults, args: Mapping[str, Any]
) -> StepArgs:
    schema = job_definitions.args_schema(conn, step.handler)
    return StepArgs(
        index, name, step.job, step.handler,
        handler_args.fields(schema) if schema is not None else None,
        handler_args.form_values(schema, args) if schema else {},
        json.dumps(args, indent=2),
    )  # fmt: skip


def _run_page(conn: Conn, name: str) -> dict[str, Any]:
    """What the "Run now" form shows: each step, in the order they run, with its
    arguments from the last DAG run started by hand (`last`), else as the step gives them."""
    workflow = _detail(conn, name)
    picture = layout(list(workflow["steps"]), [(u, d) for u, d in workflow["edges"]])
    order = [n.name for n in sorted(picture.nodes, key=lambda n: (n.layer, n.name))]
    if len(order) > MAX_EDITOR_STEPS:  # one box each would make a page nobody can use
        return {"workflow": workflow, "steps": [], "last": None, "too_large": len(order)}
    defaults = hand_runs.workflow_defaults(conn, name)
    last = hand_runs.last_workflow_args(conn, name)
    offered = {s: (last.args.get(s) if last else None) for s in order}
    steps = [
        _step_args(conn, i, s, defaults[s], a if isinstance(a, dict) else defaults[s].args)
        for i, (s, a) in enumerate(offered.items())
    ]
    return {"workflow": workflow, "steps": steps,
            "last": last if last and any(s in last.args for s in order) else None}  # fmt: skip


def _posted_steps(form: FormData) -> list[tuple[int, str]]:
    """(index, step name) of each step the form showed."""
    found = [(k[1:].removesuffix(".step"), str(v)) for k, v in form.multi_items()
             if k.startswith("s") and k.endswith(".step")]  # fmt: skip
    return [(int(i), step) for i, step in found if i.isdigit()]


def _step_form(form: FormData, index: int) -> dict[str, Any]:
    prefix = f"s{index}.args"
    return {
        "args_for": str(form.get(f"{prefix}_for", "")),
        "values": {
            k.removeprefix(prefix + "."): str(v)
            for k, v in form.multi_items()
            if k.startswith(prefix + ".")
        },
        "json": str(form.get(prefix, "")),
    }


def _read_step_args(
    conn: Conn, name: str, posted: dict[int, tuple[str, dict[str, Any]]]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each posted step's arguments as its fields or JSON editor gave them, and the
    errors by form field."""
    defaults = hand_runs.workflow_defaults(conn, name)
    chosen: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for index, (step, given) in posted.items():
        prefix = f"s{index}.args"
        if step not in defaults:
            errors["form"] = f"This workflow has no step {step!r} any more: start it again."
            continue
        if given["args_for"] and given["args_for"] != defaults[step].handler:
            errors[prefix] = "This step's job changed meanwhile: check these arguments again."
            continue
        schema = (job_definitions.args_schema(conn, given["args_for"])
                  if given["args_for"] else None)  # fmt: skip
        try:
            if schema is None:
                chosen[step] = job_definitions.parse_args(given["json"])
            else:
                chosen[step] = handler_args.from_form(schema, given["values"])
        except JobError as exc:
            errors[prefix] = str(exc)
        except handler_args.ArgsError as exc:
            errors[f"{prefix}.{exc.name}" if exc.name else prefix] = str(exc)
    return chosen, errors


def _start(conn: Conn, name: str, posted: dict[int, tuple[str, dict[str, Any]]],
           actor: str) -> tuple[Any, dict[str, str]]:  # fmt: skip
    """The DAG run started with the posted arguments, or the errors by form field."""
    chosen, errors = _read_step_args(conn, name, posted)
    if errors:
        return None, errors
    try:
        return workflows.run_now(conn, name, actor=actor, args=chosen or None), {}
    except WorkflowError as exc:
        return None, {_run_field(exc.field, posted): str(exc)}
    except UsageError as exc:  # a handler turned off, …
        return None, {"form": str(exc)}


def _run_field(field: str | None, posted: dict[int, tuple[str, dict[str, Any]]]) -> str:
    """A step's refusal (`step:NAME.args[.PROPERTY]`) goes to that step's field."""
    for index, (step, _) in posted.items():
        head = f"step:{step}."
        if field and field.startswith(head) and field[len(head) :].split(".")[0] == "args":
            return f"s{index}.{field[len(head) :]}"
    return "form"


@requires(Role.OPERATOR)
async def run_form(request: Request) -> Response:
    page = await call(request, _run_page, request.path_params["name"])
    return render(request, "workflows/run.html", errors={}, **page)


@requires(Role.OPERATOR)
async def run(request: Request) -> Response:
    """Start one DAG run with the arguments posted (a post without them: each step's
    own); the DAG run's page next, or the form with the problems next to their fields."""
    name = request.path_params["name"]
    form = await request.form()
    posted = {i: (step, _step_form(form, i)) for i, step in _posted_steps(form)}
    actor = current_user(request).username
    dag, errors = await call(request, _start, name, posted, actor)
    if dag is not None:
        return redirect(request, f"/dag-runs/{dag.id}")
    page = await call(request, _run_page, name)
    for step in page["steps"]:  # what the person typed, as typed
        typed = posted.get(step.index)
        if typed and typed[0] == step.name:
            step.values, step.json = typed[1]["values"], typed[1]["json"]
    status = 422 if any(k != "form" for k in errors) else 409
    return render(request, "workflows/run.html", status_code=status, errors=errors, **page)


def _readable(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A workflow version as one line per step (what it runs, what it waits for)."""
    upstreams: dict[str, list[str]] = {}
    for up, down in snapshot.get("edges", []):
        upstreams.setdefault(down, []).append(up)
    lines: dict[str, Any] = {}
    if snapshot.get("description"):
        lines["description"] = snapshot["description"]
    for name in sorted(snapshot.get("steps", {})):
        step = snapshot["steps"][name]
        after = sorted(upstreams.get(name, []))
        text = f"runs job {step['job']}, " + (f"after {', '.join(after)}" if after else "first")
        if step.get("args"):
            text += f", with {json.dumps(step['args'], sort_keys=True)}"
        lines[f"step {name}"] = text
    return lines


def _history_page(conn: Conn, name: str) -> dict[str, Any]:
    _detail(conn, name)  # 404 for a workflow that is not there
    return {"entries": history.entries(conn, "workflow", name, _readable)}


@requires(Role.VIEWER)
async def versions_page(request: Request) -> Response:
    name = request.path_params["name"]
    page = await call(request, _history_page, name)
    return render(request, "workflows/history.html", name=name, shown=history.shown,
                  error=None, **page)  # fmt: skip


@requires(Role.EDITOR)
async def rollback(request: Request) -> Response:
    name = request.path_params["name"]
    version = str((await request.form()).get("version", ""))
    try:
        await call(
            request, history.rollback, "workflow", name, version, current_user(request).username
        )
    except UsageError as exc:  # no such version, a job it names is gone, …
        page = await call(request, _history_page, name)
        return render(request, "workflows/history.html", status_code=422, name=name,
                      shown=history.shown, error=str(exc), **page)  # fmt: skip
    return redirect(request, f"{_url(name)}?rolled_back=1")


routes = [
    Route("/workflows", index, methods=["GET"], name="workflows_index"),
    Route("/workflows", create, methods=["POST"], name="workflows_create"),
    Route("/workflows/new", new, methods=["GET"], name="workflows_new"),
    Route("/workflows/preview", preview, methods=["POST"], name="workflows_preview"),
    Route("/workflows/{name:path}/edit", edit, methods=["GET"], name="workflows_edit"),
    Route("/workflows/{name:path}/delete", delete, methods=["POST"], name="workflows_delete"),
    Route("/workflows/{name:path}/run", run_form, methods=["GET"], name="workflows_run_form"),
    Route("/workflows/{name:path}/run", run, methods=["POST"], name="workflows_run"),
    Route(
        "/workflows/{name:path}/history", versions_page, methods=["GET"], name="workflows_history"
    ),
    Route("/workflows/{name:path}/rollback", rollback, methods=["POST"], name="workflows_rollback"),
    Route("/workflows/{name:path}", show, methods=["GET"], name="workflows_show"),
    Route("/workflows/{name:path}", update, methods=["POST"], name="workflows_update"),
]
