"""`/metrics` (Prometheus text) and `/readyz` (ready to serve: database reachable and
migrated to this version's head). `/healthz` (alive) is in `app.web.home`.

`/metrics` needs an API token (any scope, any role: Prometheus sends it as a bearer
token), unless SUNDIAL_METRICS_PUBLIC=1 opens it to scrapers inside a private network.
One reading of the database is served for SUNDIAL_METRICS_CACHE_SECONDS, so many
scrapers (or many Prometheus replicas) cost one set of queries.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.migrate import head_revision
from app.core.sql import query
from app.observability import metrics
from app.web.access import public
from app.web.api.core import ApiError, authenticate
from app.web.database import call

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Cache:
    """The last exposition and when it was read; one reader at a time refreshes it."""

    def __init__(self) -> None:
        self.body = b""
        self.read_at = -1e9
        self.lock = asyncio.Lock()


def _cache(request: Request) -> _Cache:
    state = request.app.state
    if not hasattr(state, "metrics_cache"):
        state.metrics_cache = _Cache()
    cache: _Cache = state.metrics_cache
    return cache


@public  # by setting: a token is checked below unless SUNDIAL_METRICS_PUBLIC=1
async def metrics_text(request: Request) -> Response:
    settings = request.app.state.settings
    if not settings.metrics_public:
        try:
            await authenticate(request)
        except ApiError as exc:
            return exc.response()
    cache = _cache(request)
    async with cache.lock:
        if time.monotonic() - cache.read_at >= settings.metrics_cache_seconds:
            cache.body = await call(
                request,
                metrics.read_fleet,
                settings.metrics_window_seconds,
                default_slots=settings.worker_concurrency,
            )
            cache.read_at = time.monotonic()
    return Response(cache.body, media_type=CONTENT_TYPE)


@functools.cache
def _head() -> str | None:
    return head_revision()


def _revision(conn: Conn) -> str | None:
    row = conn.execute(query("database", "database_revision")).fetchone()
    return None if row is None else str(row["version_num"])


@public
async def readyz(request: Request) -> Response:
    """200 when this process can serve: the database answers and is at this version's
    migration head; 503 with the reason otherwise (a load balancer keeps it out)."""
    try:
        current = await call(request, _revision)
    except Exception as exc:  # unreachable, or no schema at all: not ready
        log.warning("readiness check failed: %s", exc)
        return JSONResponse(
            {"status": "not ready", "reason": "the database cannot be reached or has no "
             "Sundial schema (run `sundial migrate`)"},
            status_code=503,
        )  # fmt: skip
    head = _head()
    if current != head:
        return JSONResponse(
            {"status": "not ready",
             "reason": f"the database is at migration {current}; this version needs {head} "
             "(run `sundial migrate`)"},
            status_code=503,
        )  # fmt: skip
    return JSONResponse({"status": "ready", "migration": current})


routes = [
    Route("/metrics", metrics_text, methods=["GET"], name="metrics"),
    Route("/readyz", readyz, methods=["GET"], name="readyz"),
]
