"""Schedules pages (read-only for now): what each runs, when in words, its next fire in its
own time zone, and whether it is paused."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app import schedules
from app.db import Conn
from app.states import Role
from app.web.access import requires
from app.web.database import call
from app.web.render import render


def _index_page(conn: Conn) -> dict[str, Any]:
    return {"schedules": schedules.list_schedules(conn)}


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    return render(
        request, "schedules/index.html", "schedules/_table.html", **await call(request, _index_page)
    )


routes = [Route("/schedules", index, methods=["GET"], name="schedules_index")]
