"""Lag SLO pages: every watched schedule's lag broken down by stage, the alerts (lag over
threshold, expected fires that produced no run), and the threshold form — through
`app.observability.lag_slo`.

Fragments other pages include: `/slo/alerts` (`lag_slo/_alerts.html`, for the overview)
and `/slo/schedules/{name}` (`lag_slo/_schedule.html`, for a schedule's page); both
refresh themselves every 5 seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.observability import lag_slo
from app.observability.lag_slo import SloError
from app.people.roles import Role
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import redirect, render


@dataclass(frozen=True, slots=True)
class AlertLine:
    """One line of the alerts list: an alert, or a schedule's run of missing fires (then
    `times` holds the first and the last; the schedule's page lists each)."""

    kind: str
    schedule: str
    text: str
    times: list[datetime] = field(default_factory=list)


def alert_lines(alerts: list[lag_slo.Alert]) -> list[AlertLine]:
    """The alerts, with a schedule's consecutive missing fires on one line: a watched
    schedule can miss twenty fires a day, and a hundred such schedules would make a wall
    of two thousand lines to read (and to render)."""
    runs: list[tuple[lag_slo.Alert, list[datetime]]] = []
    key: tuple[str, str, str] | None = None  # the last line's (kind, schedule, text)
    for a in alerts:
        this = (a.kind, a.schedule, a.text)
        if this == key and a.kind == "missing" and a.at is not None:
            runs[-1][1].append(a.at)
            continue
        key = this
        runs.append((a, [a.at] if a.at else []))
    lines = []
    for a, times in runs:
        if len(times) > 1:
            text = f"was expected to fire {len(times)} times and those fires produced no run"
            lines.append(AlertLine(a.kind, a.schedule, text, [times[0], times[-1]]))
        else:
            lines.append(AlertLine(a.kind, a.schedule, a.text, times))
    return lines


def _page(conn: Conn) -> dict[str, Any]:
    found = lag_slo.report(conn)
    return {"report": found, "alerts": found.alerts, "alert_lines": alert_lines(found.alerts)}


def _schedule_part(conn: Conn, name: str) -> dict[str, Any]:
    found = lag_slo.report(conn)
    return {
        "schedule_name": name,
        "lag": next((s for s in found.schedules if s.name == name), None),
        "alerts": [a for a in found.alerts if a.schedule == name],
    }


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    page = await call(request, _page)
    message = request.query_params.get("message")
    return render(request, "lag_slo/index.html", "lag_slo/_table.html", message=message,
                  errors={}, values={}, **page)  # fmt: skip


@requires(Role.VIEWER)
async def alerts(request: Request) -> Response:
    page = await call(request, _page)
    return render(request, "lag_slo/_alerts.html", **page)


@requires(Role.VIEWER)
async def schedule_part(request: Request) -> Response:
    page = await call(request, _schedule_part, request.path_params["name"])
    return render(request, "lag_slo/_schedule.html", **page)


@requires(Role.EDITOR)
async def set_threshold(request: Request) -> Response:
    form = await request.form()
    values = {"schedule": str(form.get("schedule", "")).strip(),
              "seconds": str(form.get("seconds", "")).strip()}  # fmt: skip
    try:
        seconds = _seconds(values["seconds"])
        await call(request, lag_slo.set_threshold, values["schedule"], seconds,
                   actor=current_user(request).username)  # fmt: skip
    except SloError as exc:
        page = await call(request, _page)
        return render(request, "lag_slo/index.html", "lag_slo/_form.html", status_code=422,
                      errors=field_errors(exc), values=values, **page)  # fmt: skip
    said = f"{seconds} s" if seconds is not None else "none"
    message = f"Lag threshold of {values['schedule']}: {said}."
    return redirect(request, "/slo?message=" + quote(message))


def _seconds(text: str) -> int | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise SloError("the threshold is a whole number of seconds, like 60", "seconds") from None


routes = [
    Route("/slo", index, methods=["GET"], name="lag_slo_index"),
    Route("/slo", set_threshold, methods=["POST"], name="lag_slo_set"),
    Route("/slo/alerts", alerts, methods=["GET"], name="lag_slo_alerts"),
    Route("/slo/schedules/{name:path}", schedule_part, methods=["GET"], name="lag_slo_schedule"),
]
