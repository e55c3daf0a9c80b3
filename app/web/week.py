"""The week calendar (`/calendar`): when every schedule (or those matching a search) fires
on each day of a week, on the viewer's clock. A schedule that fires more than
`app.scheduling.forecast.BAND_OVER` times a day is one band ("every 5 min") instead of its fires."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people.roles import Role
from app.scheduling import forecast, upcoming
from app.scheduling.upcoming import Week, WeekRow
from app.web.access import requires
from app.web.database import call
from app.web.render import render
from app.web.viewer_zone import viewer_zone

ENTRIES_PER_DAY = 200  # fires listed per day; the rest are counted


@dataclass(frozen=True, slots=True)
class Entry:
    at: datetime  # on the viewer's clock
    row: WeekRow
    excluded: str | None = None  # why the schedule's calendar stops this fire


@dataclass(frozen=True, slots=True)
class Column:
    day: date
    bands: list[tuple[WeekRow, int]]
    entries: list[Entry]
    more: int


def columns(week: Week) -> list[Column]:
    """The week as 7 day columns: bands first, then every fire in time order."""
    out = []
    for i, day in enumerate(week.days):
        bands = [(row, row.days[i].band) for row in week.rows if row.days[i].band]
        entries = sorted(
            (
                Entry(at.astimezone(week.zone), row, row.excluded[i][k] if row.excluded else None)
                for row in week.rows
                for k, at in enumerate(row.days[i].times)
            ),
            key=lambda e: (e.at, e.row.name),
        )
        out.append(
            Column(day, bands, entries[:ENTRIES_PER_DAY], max(0, len(entries) - ENTRIES_PER_DAY))
        )
    return out


def _monday(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return upcoming.monday_of(date.fromisoformat(text))
    except ValueError:
        return None


def _page(conn: Conn, monday: date | None, zone: str, search: str) -> dict[str, Any]:
    week = upcoming.week(conn, monday, zone=zone, search=search or None)
    return {
        "band_over": forecast.BAND_OVER,
        "week": week,
        "columns": columns(week),
        "previous": (week.monday - timedelta(days=7)).isoformat(),
        "next": (week.monday + timedelta(days=7)).isoformat(),
    }


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    zone, chosen = viewer_zone(request)
    search = request.query_params.get("q", "").strip()[:200]
    monday = _monday(request.query_params.get("week"))
    page = await call(request, _page, monday, zone, search)
    return render(
        request, "week/index.html", "week/_grid.html", zone=zone, zone_chosen=chosen,
        search=search, **page,
    )  # fmt: skip


routes = [Route("/calendar", index, methods=["GET"], name="week_index")]
