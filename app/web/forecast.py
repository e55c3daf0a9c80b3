"""The 24-hour load forecast: a heatmap of fires per minute across every active schedule
(`/forecast`), and a compact fragment the schedule editor embeds with the schedule being
edited drawn apart (`/forecast/fragment?cron=…&timezone=…&every_seconds=…&name=…`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people.roles import Role
from app.scheduling import forecast, upcoming
from app.scheduling.cron import Recurrence
from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.schedule_rules import db_now
from app.scheduling.upcoming import Forecast
from app.web.access import requires
from app.web.database import call
from app.web.render import render
from app.web.viewer_zone import viewer_zone

CELL = 10  # px of one minute in the SVG's own units; the SVG scales to its container
LABEL_WIDTH = 48
TOP = 16
LEVELS = 4
# The SVG's own colours, so an embedded fragment reads before the stylesheet applies.
COLOURS = ("#f1f3f5", "#b6d4f0", "#6fa8dc", "#2f6fb3", "#0b3d7a")
MAX_INTERVAL_SECONDS = 366 * 86400


@dataclass(frozen=True, slots=True)
class Cell:
    x: int
    y: int
    level: int
    mine: bool
    title: str


def _fires(n: int) -> str:
    return f"{n} fire{'' if n == 1 else 's'}"


def heatmap(fc: Forecast) -> dict[str, Any]:
    """What the SVG template draws: one row per hour, one cell per minute with fires."""
    both = [a + b for a, b in zip(fc.counts, fc.extra, strict=True)]
    peak = max(both) or 1
    rows = []
    cells = []
    for hour in range(24):
        local = (fc.start + timedelta(hours=hour)).astimezone(fc.zone)
        day = local.strftime("%a ") if hour == 0 or local.hour == 0 else ""
        rows.append({"y": TOP + hour * CELL, "label": f"{day}{local:%H:%M}"})
    for m, total in enumerate(both):
        if not total:
            continue
        local = (fc.start + timedelta(minutes=m)).astimezone(fc.zone)
        title = f"{local:%a %H:%M}: {_fires(total)}"
        if fc.extra[m]:
            title += f", {fc.extra[m]} of them this schedule"
        cells.append(
            Cell(
                x=LABEL_WIDTH + (m % 60) * CELL,
                y=TOP + (m // 60) * CELL,
                level=max(1, math.ceil(LEVELS * total / peak)),
                mine=fc.extra[m] > 0,
                title=title,
            )
        )
    return {
        "rows": rows,
        "cells": cells,
        "width": LABEL_WIDTH + 60 * CELL,
        "height": TOP + 24 * CELL,
        "cell": CELL,
        "ticks": [{"x": LABEL_WIDTH + m * CELL, "label": f":{m:02d}"} for m in (0, 15, 30, 45)],
        "peak": peak,
        "colours": COLOURS,
    }


def _busiest(fc: Forecast) -> list[dict[str, Any]]:
    return [
        {"at": at.astimezone(fc.zone), "count": n, "words": _fires(n)} for at, n in fc.busiest()
    ]


def _page(conn: Conn, zone: str) -> dict[str, Any]:
    fc = upcoming.forecast_with(conn, zone=zone)
    return {"fc": fc, "map": heatmap(fc), "busiest": _busiest(fc)}


def candidate_rule(
    cron: str, timezone: str, every_seconds: str, now: datetime
) -> Recurrence | None:
    """The rule being edited, from the editor's fields; None when none is given yet."""
    timezone = timezone.strip() or "UTC"
    if cron.strip():
        return Recurrence.from_cron(cron, timezone)
    if every_seconds.strip():
        try:
            seconds = int(every_seconds)
        except ValueError:
            raise RecurrenceError("the interval must be a whole number of seconds") from None
        if not 0 < seconds <= MAX_INTERVAL_SECONDS:
            raise RecurrenceError("the interval must be between 1 second and a year")
        # like a new interval schedule: its first fire one interval after it is saved
        return Recurrence.every(seconds, now + timedelta(seconds=seconds), timezone=timezone)
    return None


def fragment_page(conn: Conn, params: dict[str, str], zone: str) -> dict[str, Any]:
    """The compact forecast with the rule being edited (`params`: cron, timezone,
    every_seconds, name) drawn apart; RecurrenceError when the rule is not usable."""
    now = db_now(conn)
    rule = candidate_rule(params["cron"], params["timezone"], params["every_seconds"], now)
    excluding = params["name"].strip() or None
    fc = upcoming.forecast_with(conn, zone=zone, excluding=excluding, now=now)
    if rule is not None:
        times = upcoming.fire_times(rule, fc.start)
        fc = replace(fc, extra=forecast.minutes_of(times, fc.start))
    mine = sum(fc.extra)
    shared = sorted(
        (m for m in range(forecast.MINUTES) if fc.extra[m] and fc.counts[m]),
        key=lambda m: -fc.counts[m],
    )
    crowded = [
        {"at": (fc.start + timedelta(minutes=m)).astimezone(fc.zone), "others": fc.counts[m]}
        for m in shared
    ]
    return {"fc": fc, "map": heatmap(fc), "mine": mine, "crowded": crowded[:3],
            "has_rule": rule is not None}  # fmt: skip


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    zone, chosen = viewer_zone(request)
    page = await call(request, _page, zone)
    return render(request, "forecast/index.html", zone=zone, zone_chosen=chosen, **page)


@requires(Role.VIEWER)
async def fragment(request: Request) -> Response:
    """The compact forecast for the schedule editor (hx-get with its fields)."""
    zone, _ = viewer_zone(request)
    q = request.query_params
    params = {k: q.get(k, "") for k in ("cron", "timezone", "every_seconds", "name")}
    try:
        page = await call(request, fragment_page, params, zone)
    except RecurrenceError as exc:
        return render(request, "forecast/_fragment_error.html", status_code=422, error=str(exc))
    return render(request, "forecast/_fragment.html", zone=zone, **page)


routes = [
    Route("/forecast", index, methods=["GET"], name="forecast_index"),
    Route("/forecast/fragment", fragment, methods=["GET"], name="forecast_fragment"),
]
