"""Queues page: every named queue with what waits in it, what runs from it, how many runs
it ended each minute, and whether it is paused (by whom, why); operators pause and resume
a queue here, through `app.runs.queues` like the CLI and the API. Live over SSE (`runs`
and `clock` ticks)."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.errors import UsageError
from app.people.roles import Role
from app.runs import queues
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import redirect, render

FLASHES = {
    "paused": "Queue paused: no worker starts its runs until you resume it.",
    "resumed": "Queue resumed: workers start its runs again.",
}


async def _page(request: Request, errors: dict[str, str] | None = None, status: int = 200,
                failed: str | None = None) -> Response:  # fmt: skip
    rows = await call(request, queues.overview)
    return render(
        request,
        "queues/index.html",
        "queues/_table.html",
        status_code=status,
        queues=rows,
        minutes=queues.THROUGHPUT_MINUTES,
        done=FLASHES.get(request.query_params.get("done", "")),
        errors=errors or {},
        failed=failed,
    )


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    return await _page(request)


@requires(Role.OPERATOR)
async def pause(request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    note = str(form.get("note", "")).strip() or None
    actor = current_user(request).username
    try:
        await call(request, lambda conn: queues.pause(conn, name, actor=actor, note=note))
    except UsageError as exc:
        return await _page(request, field_errors(exc), status=422, failed=name)
    return redirect(request, f"/queues?done=paused#queue-{quote(name, safe='')}")


@requires(Role.OPERATOR)
async def resume(request: Request) -> Response:
    name = request.path_params["name"]
    actor = current_user(request).username
    try:
        await call(request, lambda conn: queues.resume(conn, name, actor=actor))
    except UsageError as exc:
        return await _page(request, field_errors(exc), status=422, failed=name)
    return redirect(request, f"/queues?done=resumed#queue-{quote(name, safe='')}")


routes = [
    Route("/queues", index, methods=["GET"], name="queues_index"),
    Route("/queues/{name}/pause", pause, methods=["POST"], name="queues_pause"),
    Route("/queues/{name}/resume", resume, methods=["POST"], name="queues_resume"),
]
