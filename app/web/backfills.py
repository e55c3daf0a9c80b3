"""Backfills on a schedule's page: pick a past range in the schedule's zone, see what it
will run (a preview), start it with a cap on runs at once, follow its progress live, and
cancel it. Handlers parse the form and call `app.scheduling.backfills` (the CLI's and the
API's functions), then render."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.errors import UsageError, about
from app.people.roles import Role
from app.scheduling import backfills, schedule_reads, schedule_rules, schedule_spec
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import redirect, render
from app.web.schedules import _show


def _url(name: str, suffix: str = "") -> str:
    return f"/schedules/{quote(name, safe='')}{suffix}"


def _values(form: Any) -> dict[str, str]:
    return {k: str(form.get(k, "")).strip() for k in ("start", "end", "concurrency")}


def _parse(conn: Conn, name: str, values: dict[str, str]) -> tuple[datetime, datetime, int]:
    zone = schedule_reads.zone_of(conn, name)
    now = schedule_rules.db_now(conn)
    times = []
    for field, label in (("start", "the start"), ("end", "the end")):
        with about(field):
            if not values[field]:
                raise UsageError(f"Fill in {label} of the range (date and time).")
            times.append(schedule_spec.parse_when(values[field], zone, now))
    text = values["concurrency"] or "1"
    if not (text.isascii() and text.isdigit()):
        raise UsageError(f"At once must be a whole number, not {text!r}.", "concurrency")
    return times[0], times[1], int(text)


def _preview(conn: Conn, name: str, values: dict[str, str], actor: str, dry_run: bool) -> Any:
    start, end, concurrency = _parse(conn, name, values)
    return backfills.start(conn, name, start=start, end=end, concurrency=concurrency,
                           dry_run=dry_run, actor=actor)  # fmt: skip


@requires(Role.OPERATOR)
async def preview(request: Request) -> Response:
    """What the range would run; for htmx the preview alone, else the page with it."""
    name = request.path_params["name"]
    values = _values(await request.form())
    actor = current_user(request).username
    try:
        shown = await call(request, _preview, name, values, actor, True)
    except UsageError as exc:
        errors = field_errors(exc, whole_form="end")
        if request.headers.get("HX-Request") == "true":
            return render(request, "schedules/_backfill_preview.html", status_code=200,
                          errors=errors, values=values, preview=None, url=_url(name))  # fmt: skip
        return await _show(request, 422, backfill_errors=errors, backfill_values=values)
    if request.headers.get("HX-Request") == "true":
        return render(request, "schedules/_backfill_preview.html", errors={}, values=values,
                      preview=shown, url=_url(name))  # fmt: skip
    return await _show(request, backfill_values=values, backfill_preview=shown)


@requires(Role.OPERATOR)
async def create(request: Request) -> Response:
    name = request.path_params["name"]
    values = _values(await request.form())
    actor = current_user(request).username
    try:
        await call(request, _preview, name, values, actor, False)
    except UsageError as exc:
        errors = field_errors(exc, whole_form="end")
        return await _show(request, 422, backfill_errors=errors, backfill_values=values)
    return redirect(request, _url(name, "?done=backfill-started#backfills"))


def _list(conn: Conn, name: str) -> dict[str, Any]:
    row = schedule_reads.find(conn, name)
    return {"schedule": row, "backfills": backfills.listed(conn, schedule_id=row["id"])}


@requires(Role.VIEWER)
async def progress(request: Request) -> Response:
    """The backfills' progress alone: the page fetches it again whenever runs change."""
    name = request.path_params["name"]
    try:
        page = await call(request, _list, name)
    except UsageError as exc:
        raise HTTPException(404, str(exc)) from None
    return render(request, "schedules/_backfill_list.html", url=_url(name), **page)


@requires(Role.OPERATOR)
async def cancel(request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    if form.get("confirm") != "yes":
        errors = {"cancel": "Tick the box to confirm cancelling the backfill."}
        return await _show(request, 422, backfill_errors=errors)
    actor = current_user(request).username
    try:
        backfill_id = backfills.parse_id(request.path_params["id"])
        await call(request, backfills.cancel, backfill_id, actor=actor)
    except UsageError as exc:
        return await _show(request, 409, backfill_errors={"cancel": str(exc)})
    return redirect(request, _url(name, "?done=backfill-cancelled#backfills"))


routes = [
    Route("/schedules/{name:path}/backfills/preview", preview, methods=["POST"],
          name="backfills_preview"),
    Route("/schedules/{name:path}/backfills/{id}/cancel", cancel, methods=["POST"],
          name="backfills_cancel"),
    Route("/schedules/{name:path}/backfills", create, methods=["POST"], name="backfills_create"),
    Route("/schedules/{name:path}/backfills", progress, methods=["GET"], name="backfills_list"),
]  # fmt: skip
