"""The overview page and the health check."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.db import Conn
from app.sql import query
from app.states import Role, RunStatus
from app.web.access import public, requires
from app.web.database import call
from app.web.render import render

log = logging.getLogger(__name__)


def overview(conn: Conn, now: datetime | None = None) -> dict[str, Any]:
    counts = {r["status"]: r["n"] for r in conn.execute(query("web", "home_run_counts"))}
    workers = conn.execute(query("web", "home_live_workers"), {"now": now}).fetchone()
    return {
        "status_counts": [(s.value, counts.get(s.value, 0)) for s in RunStatus],
        "live_workers": workers["n"] if workers else 0,
    }


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    return render(request, "home/index.html", "home/_counts.html", **await call(request, overview))


def _ping(conn: Conn) -> None:
    conn.execute(query("web", "health_check"))


@public
async def healthz(request: Request) -> Response:
    """200 when the database answers, 503 otherwise (the reason goes to the log only)."""
    try:
        await call(request, _ping)
    except Exception as exc:  # any failure means "not healthy"; details in the log
        log.warning("health check failed: %s", exc)
        return JSONResponse({"status": "error", "database": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ok", "database": "ok"})


routes = [
    Route("/", index, name="home"),
    Route("/healthz", healthz, name="healthz"),
]
