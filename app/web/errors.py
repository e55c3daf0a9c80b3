"""Error pages: the database unreachable (503, fast), not found (404)."""

from __future__ import annotations

import logging

import psycopg
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from app.web.render import render

log = logging.getLogger(__name__)


async def database_unavailable(request: Request, exc: Exception) -> Response:
    log.error("database unavailable for %s: %s", request.url.path, exc)
    return render(request, "shared/unavailable.html", status_code=503)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return render(request, "shared/error.html", status_code=exc.status_code, detail=exc.detail)


handlers = {
    PoolTimeout: database_unavailable,
    psycopg.OperationalError: database_unavailable,
    HTTPException: http_error,
}
