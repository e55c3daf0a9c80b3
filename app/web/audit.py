"""The audit log page: every change people made, filtered by actor, action and date."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people import audit
from app.people.audit import AuditFilter
from app.people.roles import Role
from app.scheduling.zones import zone_named
from app.web.access import requires
from app.web.database import call
from app.web.render import render
from app.web.viewer_zone import viewer_zone


def _day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _page(conn: Conn, where: AuditFilter) -> dict[str, Any]:
    actors, actions = audit.filter_choices(conn)
    return {"entries": audit.entries(conn, where), "actors": actors, "actions": actions}


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    params = request.query_params
    since, until = _day(params.get("from")), _day(params.get("to"))
    zone = zone_named(viewer_zone(request)[0])  # days as the viewer's calendar has them
    where = AuditFilter(
        actor=params.get("actor") or None,
        action=params.get("action") or None,
        since=datetime.combine(since, time(), zone) if since else None,
        until=datetime.combine(until + timedelta(days=1), time(), zone) if until else None,
    )
    bad_dates = [n for n in ("from", "to") if params.get(n) and _day(params.get(n)) is None]
    return render(
        request,
        "audit/index.html",
        "audit/_table.html",
        filters=params,
        bad_dates=bad_dates,
        **await call(request, _page, where),
    )


routes = [Route("/audit", index, name="audit_index")]
