"""Queues page: every named queue with what waits in it, what runs from it, how many runs
it ended each minute, whether it is paused (by whom, why) and its limits; operators pause
and resume a queue and set its limits here, through `app.runs.queues` like the CLI and the
API. Live over SSE (`runs` and `clock` ticks)."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.errors import UsageError
from app.people.roles import Role
from app.runs import breakers, queues
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors, optional_whole
from app.web.render import redirect, render

FLASHES = {
    "service_paused": "Runs that call the service wait until you let them through.",
    "service_resumed": "Runs that call the service go again.",
    "service_settings": "Settings saved: the service's breaker follows them from now on.",
    "paused": "Queue paused: no worker starts its runs until you resume it.",
    "resumed": "Queue resumed: workers start its runs again.",
    "limited": "Limits saved: every worker keeps to them from now on.",
}
NUMBER_LABELS = {
    "max_running": "The most at once",
    "key_max_running": "The most for each key",
    "rate_limit": "The starts",
    "rate_period_seconds": "The seconds",
    "rate_burst": "The starts at once",
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
        services=await call(request, breakers.overview),
        minutes=queues.THROUGHPUT_MINUTES,
        done=FLASHES.get(request.query_params.get("done", "")),
        errors=errors or {},
        failed=failed,
    )


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    return await _page(request)


@requires(Role.VIEWER)
async def services(request: Request) -> Response:
    """The services part alone, as the page refreshes it."""
    rows = await call(request, breakers.overview)
    return render(request, "queues/_services.html", services=rows)


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


@requires(Role.OPERATOR)
async def limits_form(request: Request) -> Response:
    name = request.path_params["name"]
    row = next((q for q in await call(request, queues.overview) if q.name == name), None)
    values = {f: "" if row is None or getattr(row, f) is None else str(getattr(row, f))
              for f in queues.LIMIT_FIELDS}  # fmt: skip
    values["rate_per_key"] = "yes" if row is not None and row.rate_per_key else ""
    values["fair_share"] = "yes" if row is not None and row.fair_share else ""
    values["key_weights"] = "\n".join(
        f"{key} = {weight}" for key, weight in sorted((row.key_weights if row else {}).items())
    )
    return _limits_page(request, name, values, {})


@requires(Role.OPERATOR)
async def set_limits(request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    values = {f: str(form.get(f, "")).strip() for f in queues.LIMIT_FIELDS}
    actor = current_user(request).username
    try:
        n = {f: optional_whole(values[f], f, label) for f, label in NUMBER_LABELS.items()}
        await call(request, lambda conn: queues.set_limits(
            conn, name, actor=actor, max_running=n["max_running"],
            key_field=values["key_field"] or None, key_max_running=n["key_max_running"],
            rate_limit=n["rate_limit"], rate_period_seconds=n["rate_period_seconds"],
            rate_burst=n["rate_burst"], rate_per_key=values["rate_per_key"] == "yes",
            fair_share=values["fair_share"] == "yes",
            key_weights=_weights(values["key_weights"])))  # fmt: skip
    except UsageError as exc:
        return _limits_page(request, name, values, field_errors(exc), status=422)
    return redirect(request, f"/queues?done=limited#queue-{quote(name, safe='')}")


def _weights(text: str) -> dict[str, int]:
    """The weights box, one `key = number` a line, as {key: number}."""
    weights = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, number = line.rpartition("=")
        if not sep or not key.strip() or not number.strip().isdigit():
            raise queues.QueueError(
                f"line {n} of the weights: write a key, '=' and a whole number, like acme = 3",
                "key_weights",
            )
        weights[key.strip()] = int(number)
    return weights


def _limits_page(request: Request, name: str, values: dict[str, str], errors: dict[str, str],
                 status: int = 200) -> Response:  # fmt: skip
    return render(request, "queues/limits.html", status_code=status, name=name, values=values,
                  errors=errors)  # fmt: skip


routes = [
    Route("/queues", index, methods=["GET"], name="queues_index"),
    Route("/queues/services", services, methods=["GET"], name="queues_services"),
    Route("/queues/{name}/pause", pause, methods=["POST"], name="queues_pause"),
    Route("/queues/{name}/resume", resume, methods=["POST"], name="queues_resume"),
    Route("/queues/{name}/limits", limits_form, methods=["GET"], name="queues_limits_form"),
    Route("/queues/{name}/limits", set_limits, methods=["POST"], name="queues_limits"),
]
