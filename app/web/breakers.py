"""The services jobs call, on the Queues page: an operator pauses the runs that call one
(opens its circuit breaker by hand), lets them through again (closes it), or changes its
breaker's settings here, through `app.runs.breakers` like the CLI and the API."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.errors import UsageError
from app.people.roles import Role
from app.runs import breakers
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors, optional_whole
from app.web.render import redirect, render

WHOLE_LABELS = {
    "min_calls": "The fewest calls",
    "window_seconds": "The seconds of calls",
    "cool_off_seconds": "The seconds to wait",
    "probes": "The trial runs",
    "retry_window_seconds": "The seconds of the retry budget",
}
PERCENT_FIELDS = {"failure_threshold": "The share of failed calls", "retry_budget": "The share"}


def _back(request: Request, name: str, done: str) -> Response:
    return redirect(request, f"/queues?done={done}#service-{quote(name, safe='')}")


@requires(Role.OPERATOR)
async def open_breaker(request: Request) -> Response:
    name = request.path_params["name"]
    note = str((await request.form()).get("note", "")).strip() or None
    actor = current_user(request).username
    try:
        await call(request, lambda conn: breakers.open_by_hand(conn, name, actor=actor,
                                                               note=note))  # fmt: skip
    except UsageError as exc:
        return _refused(request, exc)
    return _back(request, name, "service_paused")


@requires(Role.OPERATOR)
async def close_breaker(request: Request) -> Response:
    name = request.path_params["name"]
    actor = current_user(request).username
    try:
        await call(request, lambda conn: breakers.close_by_hand(conn, name, actor=actor))
    except UsageError as exc:
        return _refused(request, exc)
    return _back(request, name, "service_resumed")


def _refused(request: Request, exc: UsageError) -> Response:
    return render(request, "queues/breaker_refused.html", status_code=422, message=str(exc))


@requires(Role.OPERATOR)
async def settings_form(request: Request) -> Response:
    name = request.path_params["name"]
    found = [b for b in await call(request, breakers.overview) if b.name == name]
    if not found:
        return render(request, "queues/breaker_refused.html", status_code=404,
                      message=f"No job names a service called {name}.")  # fmt: skip
    b = found[0]
    values = {f: str(getattr(b, f)) for f in WHOLE_LABELS}
    values["failure_threshold"] = _percent(b.failure_threshold)
    values["retry_budget"] = "" if b.retry_budget is None else _percent(b.retry_budget)
    return _settings_page(request, name, values, {})


def _percent(share: float) -> str:
    return f"{share * 100:g}"


@requires(Role.OPERATOR)
async def save_settings(request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    values = {f: str(form.get(f, "")).strip() for f in (*WHOLE_LABELS, *PERCENT_FIELDS)}
    actor = current_user(request).username
    try:
        given: dict[str, Any] = {
            f: optional_whole(values[f], f, label) for f, label in WHOLE_LABELS.items()
        }
        for f, label in PERCENT_FIELDS.items():
            given[f] = _share_of_percent(values[f], f, label)
        await call(request, lambda conn: breakers.set_settings(conn, name, actor=actor,
                                                                **given))  # fmt: skip
    except UsageError as exc:
        return _settings_page(request, name, values, field_errors(exc), status=422)
    return _back(request, name, "service_settings")


def _share_of_percent(text: str, field: str, label: str) -> float | None:
    """A percentage box (`50`, `12.5` or `50 %`) as a share; empty: None."""
    text = text.removesuffix("%").strip()
    if not text:
        return None
    try:
        return float(text) / 100
    except ValueError:
        raise breakers.BreakerError(f"{label} must be a percentage, like 50", field) from None


def _settings_page(request: Request, name: str, values: dict[str, str],
                   errors: dict[str, str], status: int = 200) -> Response:  # fmt: skip
    return render(request, "queues/breaker.html", status_code=status, name=name,
                  values=values, errors=errors)  # fmt: skip


routes = [
    Route("/breakers/{name}", settings_form, methods=["GET"], name="breakers_form"),
    Route("/breakers/{name}", save_settings, methods=["POST"], name="breakers_settings"),
    Route("/breakers/{name}/open", open_breaker, methods=["POST"], name="breakers_open"),
    Route("/breakers/{name}/close", close_breaker, methods=["POST"], name="breakers_close"),
]
