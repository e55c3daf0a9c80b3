"""Workers page: live workers and their load, and the workers that disappeared in the last
hour with the runs they released. Live over SSE (`workers` and `clock` ticks: a worker
that died leaves the page once its heartbeat is a lease old)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.sql import query
from app.people.roles import Role
from app.web.access import requires
from app.web.database import call
from app.web.home import live_worker_window
from app.web.render import render


def saturation(worker: dict[str, Any]) -> dict[str, Any]:
    """What a worker's heartbeat reports, as the page shows it: in-flight runs of its
    slots, its pools' busy share, loop lag."""
    stats = worker["stats"] or {}
    in_flight = int(stats.get("in_flight", 0))
    slots = max(int(worker["concurrency"]), 1)
    threads, processes = stats.get("threads_total", 0), stats.get("processes_total", 0)
    return {
        **worker,
        "in_flight": in_flight,
        "slots_used": round(100 * in_flight / slots),
        "threads": f"{stats.get('threads_busy', 0)} of {threads}" if threads else "—",
        "processes": f"{stats.get('processes_busy', 0)} of {processes}" if processes else "—",
        "loop_lag_ms": stats.get("loop_lag_ms"),
        "completed": stats.get("completed", 0),
        "queue": stats.get("queue", "default"),
        "failed": stats.get("failed", 0),
    }


def workers_page(conn: Conn, stale_seconds: float) -> dict[str, Any]:
    params = {"now": None, "stale_seconds": stale_seconds}
    live = conn.execute(query("web", "workers_live"), params).fetchall()
    gone = conn.execute(query("web", "workers_gone"), params).fetchall()
    released: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if gone:
        rows = conn.execute(
            query("web", "workers_released_runs"),
            {"now": None, "workers": [w["id"] for w in gone]},
        ).fetchall()
        for row in rows:
            released[row["worker"]].append(row)
    return {
        "live": [saturation(w) for w in live],
        "gone": [{**w, "released": released.get(w["id"], [])} for w in gone],
        "stale_seconds": stale_seconds,
    }


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    page = await call(request, workers_page, live_worker_window(request))
    return render(request, "workers/index.html", "workers/_table.html", **page)


routes = [Route("/workers", index, methods=["GET"], name="workers_index")]
