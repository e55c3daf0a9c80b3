"""Starlette application factory: routes, templates, static files, database pool."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from app.config import Settings
from app.db import connection_options
from app.resources import STATIC_DIR, TEMPLATES_DIR

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_SECONDS = 3.0

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))


def pool(request: Request) -> AsyncConnectionPool[Any]:
    result: AsyncConnectionPool[Any] = request.app.state.pool
    return result


def render(request: Request, page: str, fragment: str | None = None, **context: Any) -> Response:
    """The full page, or only `fragment` when htmx asks for it (one URL serves both)."""
    is_htmx = request.headers.get("HX-Request") == "true"
    template = fragment if (is_htmx and fragment) else page
    response = templates.TemplateResponse(request, template, context)
    response.headers["Vary"] = "HX-Request"
    return response


async def home(request: Request) -> Response:
    async with pool(request).connection() as conn:
        cur = await conn.execute("SELECT status, count(*) AS n FROM job_runs GROUP BY status")
        counts = {row["status"]: row["n"] for row in await cur.fetchall()}
        cur = await conn.execute(
            "SELECT count(*) AS n FROM workers "
            "WHERE stopped_at IS NULL AND last_seen > now() - interval '1 minute'"
        )
        row = await cur.fetchone()
    from app.states import RunStatus

    return render(
        request,
        "pages/home.html",
        status_counts=[(s.value, counts.get(s.value, 0)) for s in RunStatus],
        live_workers=row["n"] if row else 0,
    )


async def healthz(request: Request) -> Response:
    """200 when the database answers, 503 with the reason otherwise."""
    try:
        async with pool(request).connection(timeout=HEALTH_TIMEOUT_SECONDS) as conn:
            await conn.execute("SELECT 1")
    except Exception as exc:
        log.warning("health check failed: %s", exc)
        return JSONResponse({"status": "error", "database": str(exc)}, status_code=503)
    return JSONResponse({"status": "ok", "database": "ok"})


def create_app(settings: Settings, database_url: str) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.pool = AsyncConnectionPool(
            database_url,
            min_size=1,
            max_size=10,
            kwargs={"autocommit": True, "row_factory": dict_row, **connection_options()},
            open=False,
        )
        await app.state.pool.open()
        try:
            yield
        finally:
            await app.state.pool.close()

    routes = [
        Route("/", home, name="home"),
        Route("/healthz", healthz, name="healthz"),
        Mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.settings = settings
    return app
