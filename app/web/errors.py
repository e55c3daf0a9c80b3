"""Error pages: the database unreachable (503, fast), not found (404), a request holding
text the database cannot hold (400)."""

from __future__ import annotations

import logging

import psycopg
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match

from app.web.render import render

log = logging.getLogger(__name__)


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/v1/")


async def database_unavailable(request: Request, exc: Exception) -> Response:
    log.error("database unavailable for %s: %s", request.url.path, exc)
    if _is_api(request):
        return JSONResponse(
            {"error": {"message": "the database cannot be reached", "field": None}}, 503
        )
    return render(request, "shared/unavailable.html", status_code=503)


def allowed_methods(request: Request) -> str:
    """Every method some route serves at this path (one route per method is common here,
    so the route that refused the request knows only its own)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "\x00"})
        if match is not Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        exc = HTTPException(405, exc.detail, headers={"Allow": allowed_methods(request)})
    if _is_api(request):  # the JSON API answers in JSON even where no handler ran (404, 405)
        return JSONResponse(
            {"error": {"message": str(exc.detail), "field": None}},
            exc.status_code,
            headers=exc.headers,
        )
    return render(request, "shared/error.html", status_code=exc.status_code, detail=exc.detail)


NUL_IN_REQUEST = (
    "The request holds a NUL character (%00 in an address, \\u0000 in text), which Sundial "
    "cannot store or look up: remove it and try again."
)
# psycopg refuses such text itself, before sending it (its own words, not the server's);
# the server refuses \u0000 inside JSON it turns into text with this SQLSTATE.
_CLIENT_NUL = "PostgreSQL text fields cannot contain NUL"
_UNTRANSLATABLE_CHARACTER = "22P05"


async def unreadable_text(request: Request, exc: Exception) -> Response:
    """A NUL character sent in a path, a filter, a form or a JSON body reached the
    database, which cannot hold one: the person gets a 400 saying so. Any other data error
    is a fault (500)."""
    params = request.query_params.multi_items()
    in_address = "\x00" in request.url.path or any("\x00" in k + v for k, v in params)
    refused = str(exc).startswith(_CLIENT_NUL) or (
        getattr(exc, "sqlstate", None) == _UNTRANSLATABLE_CHARACTER
    )
    if not (in_address or refused):
        raise exc
    return await http_error(request, HTTPException(400, NUL_IN_REQUEST))


handlers = {
    PoolTimeout: database_unavailable,
    psycopg.OperationalError: database_unavailable,
    psycopg.DataError: unreadable_text,
    HTTPException: http_error,
}
