"""The web process: the dashboard, the JSON API (`app.web.api`), /healthz, /readyz,
/metrics.

`create_app` assembles it: security middleware (CSRF on every unsafe request, security
headers), the route list of each resource module (its `routes`, paths in full so `/jobs`
needs no trailing slash), error pages, and
the database pool that lets async handlers call the synchronous domain functions (see
`app.web.database`). Each handler declares the role it needs (`app.web.access`). The
event hub (`app.web.events`) starts and stops with the app.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.core import collector
from app.core.config import Settings
from app.core.db import listen_url
from app.core.resources import STATIC_DIR
from app.people import users
from app.web import (
    audit,
    auth,
    backfills,
    breakers,
    bulk_actions,
    calendars,
    dag_runs,
    dead_letters,
    errors,
    events,
    forecast,
    home,
    job_stats,
    jobs,
    lag_slo,
    notifications,
    observability,
    queues,
    run_logs,
    runs,
    schedules,
    tokens,
    week,
    workers,
    workflows,
)
from app.web.api import routes as api_routes
from app.web.database import make_pool
from app.web.security import SecurityMiddleware


def create_app(settings: Settings, database_url: str) -> Starlette:
    pool = make_pool(database_url)
    hub = events.EventHub(listen_url(settings, database_url))
    bulk_runner = bulk_actions.BulkRunner(pool)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Not waiting: a web process whose database is down still starts and says so.
        pool.open(wait=False)
        await hub.start()
        await bulk_runner.start()
        # See app/core/collector.py: full collections stalled a request now and then for 20 to
        # 100 ms, most of a page's 50 ms budget and more.
        collector.freeze_start_up()
        collector.collect_less_often()
        await asyncio.to_thread(users.dummy_hash)  # a first unknown name answers as slowly
        try:
            yield
        finally:
            await bulk_runner.stop()
            await hub.stop()
            pool.close()

    routes = [
        *home.routes,
        *auth.routes,
        *jobs.routes,
        *backfills.routes,
        *schedules.routes,
        *forecast.routes,
        *week.routes,
        *calendars.routes,
        *workflows.routes,
        *audit.routes,
        *bulk_actions.routes,  # before runs.routes: /runs/bulk is no run id
        *runs.routes,
        *workers.routes,
        *queues.routes,
        *breakers.routes,
        *events.routes,
        *tokens.routes,
        *observability.routes,
        *api_routes,  # the JSON API, under /api/v1
        *dead_letters.routes,
        *run_logs.routes,
        *job_stats.routes,
        *dag_runs.routes,
        *lag_slo.routes,
        *notifications.routes,
        Mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=_middleware(settings),
        exception_handlers=errors.handlers,
    )
    # no redirect to an address with or without a trailing slash: Starlette builds it from
    # the Host header, which a client chooses
    app.router.redirect_slashes = False
    app.state.settings = settings
    app.state.pool = pool
    app.state.events = hub
    app.state.bulk_runner = bulk_runner
    app.state.overview_snapshot = home.Snapshot()
    return app


def _middleware(settings: Settings) -> list[Middleware]:
    """Outermost first: the real client and scheme from a trusted proxy, then the host
    check, then the security headers and CSRF (which read the scheme)."""
    stack: list[Middleware] = []
    if settings.trusted_proxies:
        stack.append(
            Middleware(ProxyHeadersMiddleware, trusted_hosts=list(settings.trusted_proxies))
        )
    if settings.allowed_hosts:
        stack.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts)))
    stack.append(Middleware(SecurityMiddleware, secret_key=settings.secret_key))
    return stack
