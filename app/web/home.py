"""The overview (home page, live for on-call) and the health check.

Everything on the overview comes from named queries backed by indexes (`web.sql`). An SSE
tick makes every open overview re-fetch at once; those re-fetches share one reading of the
figures per web process (`Snapshot`), so a hundred wall screens cost the database one set
of queries, not a hundred. A page load always reads afresh. The hour's past minutes are
read once and kept (`Minutes`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.resources import STATIC_DIR
from app.core.sql import query
from app.people.roles import Role
from app.runs import breakers
from app.runs.breaker_rules import BreakerState
from app.runs.states import RunStatus
from app.scheduling.schedule_rules import db_now
from app.web.access import public, requires
from app.web.charts import line_chart
from app.web.database import call
from app.web.events import hub_of
from app.web.render import render

log = logging.getLogger(__name__)

SNAPSHOT_SECONDS = 0.5
COUNT_CAP = 10_000  # runs by status are counted up to this, then shown as "10,000+"
STUCK_GRACE_SECONDS = 60  # a lease expired this long ago and still running: no reaper?
WAITING_ALERT_SECONDS = 300  # the oldest due run waited this long: not enough workers
RISING_LAG_FACTOR = 2.0  # last 5 minutes' p99 lag against the hour's before it
RISING_LAG_FLOOR_SECONDS = 5.0  # below this, lag is never an alert


@dataclass(frozen=True, slots=True)
class Alert:
    level: str  # "warn" or "error"
    text: str


def live_worker_window(request: Request) -> float:
    """A worker is alive while it heartbeat within one lease (it beats three times per
    lease), so one that died leaves the pages within a lease."""
    seconds: float = request.app.state.settings.lease_seconds
    return seconds


class Minutes:
    """The last hour minute by minute. A minute that has passed no longer changes (its runs
    have started and, where counted, finished), so it is read once and kept; each refresh
    reads only the minutes since the last kept one."""

    def __init__(self) -> None:
        self.kept: dict[datetime, dict[str, Any]] = {}

    def read(self, conn: Conn, now: datetime) -> list[dict[str, Any]]:
        hour_ago = now - timedelta(hours=1)
        settled = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
        self.kept = {m: row for m, row in self.kept.items() if m >= hour_ago}
        since = max([hour_ago, *(m + timedelta(minutes=1) for m in self.kept)])
        fresh = conn.execute(query("web", "overview_minutes"), {"since": since}).fetchall()
        rows = {**self.kept, **{r["minute"]: r for r in fresh if r["minute"] >= since}}
        self.kept.update({r["minute"]: r for r in fresh if since <= r["minute"] < settled})
        return [rows[m] for m in sorted(rows) if m >= hour_ago]


def overview(
    conn: Conn,
    at: datetime | None = None,
    *,
    stale_seconds: float = 60.0,
    minutes_kept: Minutes | None = None,
) -> dict[str, Any]:
    """The overview's figures as of `at` (None: the database clock)."""
    now = db_now(conn, at)
    params = {"now": at}
    statuses = [s.value for s in RunStatus]
    counts = conn.execute(query("web", "overview_run_counts"), {"cap": COUNT_CAP}).fetchone()
    assert counts is not None  # one row, a column per status
    depth = conn.execute(query("web", "overview_pending_depth"), params).fetchall()
    minutes = (minutes_kept or Minutes()).read(conn, now)
    workers = conn.execute(
        query("web", "overview_live_workers"), {**params, "stale_seconds": stale_seconds}
    ).fetchone()
    leaders = conn.execute(query("web", "overview_leaders"), params).fetchall()
    poison = conn.execute(query("web", "overview_poison_jobs"), params).fetchall()
    expiries = conn.execute(query("web", "overview_lease_expiries"), params).fetchone()
    stuck = conn.execute(
        query("web", "overview_stuck_runs"), {**params, "grace_seconds": STUCK_GRACE_SECONDS}
    ).fetchone()
    live_workers = workers["n"] if workers else 0
    oldest_due = max((r["oldest_due_seconds"] or 0.0 for r in depth), default=0.0)
    start = now - timedelta(hours=1)
    points = [(r["minute"], {"p50": r["lag_p50"], "p99": r["lag_p99"]}) for r in minutes]
    finished_last_hour = sum(r["finished"] for r in minutes)
    return {
        "status_counts": [(s, counts.get(s, 0)) for s in statuses],
        "count_cap": COUNT_CAP,
        "live_workers": live_workers,
        "pending_depth": depth,
        "pending_total": sum(r["n"] for r in depth),
        "due_total": sum(r["due"] for r in depth),
        "oldest_due_seconds": oldest_due,
        "throughput": _throughput(minutes, now),
        "finished_last_hour": finished_last_hour,
        "lag_chart": line_chart(points, ["p50", "p99"], start, now),
        "leaders": leaders,
        "alerts": _alerts(poison, expiries, stuck, minutes, oldest_due, live_workers, now)
        + _service_alerts(breakers.overview(conn)),
        "as_of": now,
    }


def _throughput(minutes: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """Runs finished per minute: the last full minute, and the hour's average and bars."""
    by_minute = {r["minute"]: r for r in minutes}
    this_minute = now.replace(second=0, microsecond=0)
    last_full = by_minute.get(this_minute - timedelta(minutes=1))
    bars = []
    peak = max((r["finished"] for r in minutes), default=0) or 1
    for i in range(60):
        at = this_minute - timedelta(minutes=59 - i)
        row = by_minute.get(at)
        n = row["finished"] if row else 0
        failed = row["failed"] if row else 0
        bars.append({"x": i * 10, "n": n, "failed": failed, "h": round(40 * n / peak, 1)})
    return {
        "last_minute": last_full["finished"] if last_full else 0,
        "per_minute": _rate(sum(r["finished"] for r in minutes) / 60),
        "bars": bars,
        "peak": peak,
    }


def _rate(per_minute: float) -> str:
    """`12`, `1.5`, `0.03`: two significant figures, so a quiet hour is not `0.0`."""
    return f"{per_minute:.2g}" if per_minute < 10 else str(round(per_minute))


def _service_alerts(services: list[breakers.Breaker]) -> list[Alert]:
    """A service whose breaker is not closed: the runs that call it wait (Queues page)."""
    alerts = []
    for b in services:
        if b.state is BreakerState.OPEN:
            why = f"paused by {b.changed_by}" if b.manual else "failing"
            alerts.append(Alert("error", f"{b.name} is {why}: the runs that call it wait "
                                         "(Queues page, Services)."))  # fmt: skip
        elif b.state is BreakerState.HALF_OPEN:
            text = f"{b.name} failed lately: a few trial runs check whether it is back"
            alerts.append(Alert("warn", text + " (Queues page, Services)."))
    return alerts


def _alerts(
    poison: list[dict[str, Any]],
    expiries: dict[str, Any] | None,
    stuck: dict[str, Any] | None,
    minutes: list[dict[str, Any]],
    oldest_due: float,
    live_workers: int,
    now: datetime,
) -> list[Alert]:
    alerts = [
        Alert(
            "error",
            f"Job {p['handler']} failed {p['n']} time{'s' if p['n'] != 1 else ''} "
            "in the last hour even after retrying.",
        )
        for p in poison
    ]
    if stuck and stuck["n"]:
        alerts.append(
            Alert(
                "error",
                f"{stuck['n']} running run(s) lost their worker over a "
                "minute ago and nobody took them back: is a reaper running?",
            )
        )
    if expiries and expiries["n"]:
        alerts.append(
            Alert(
                "warn",
                f"{expiries['n']} run(s) lost their worker in the last hour "
                f"({expiries['workers']} worker(s) stopped heartbeating); the reaper "
                "took them back.",
            )
        )
    if oldest_due >= WAITING_ALERT_SECONDS:
        who = "no worker is running" if live_workers == 0 else "workers are not keeping up"
        alerts.append(
            Alert("error", f"The oldest due run has waited {round(oldest_due / 60)} min: {who}.")
        )
    recent = [
        r["lag_p99"]
        for r in minutes
        if r["lag_p99"] is not None and r["minute"] >= now - timedelta(minutes=5)
    ]
    earlier = [
        r["lag_p99"]
        for r in minutes
        if r["lag_p99"] is not None and r["minute"] < now - timedelta(minutes=5)
    ]
    if recent and earlier:
        now_lag, before = max(recent), sorted(earlier)[len(earlier) // 2]
        if now_lag >= RISING_LAG_FLOOR_SECONDS and now_lag >= RISING_LAG_FACTOR * before:
            alerts.append(
                Alert(
                    "warn",
                    f"Schedule lag is rising: p99 {now_lag:.0f} s in the "
                    f"last 5 minutes against {before:.0f} s before.",
                )
            )
    return alerts


class Snapshot:
    """The overview's figures as of the hub's last change, shared by the browsers that
    re-fetch on the same tick: reloaded when anything was published since (so a tick never
    gets figures older than its change) or after `SNAPSHOT_SECONDS`; one load at a time."""

    def __init__(self) -> None:
        self._value: dict[str, Any] | None = None
        self._generation = -1
        self._at = 0.0
        self._lock: asyncio.Lock | None = None
        self._minutes = Minutes()

    async def get(self, request: Request, *, fresh: bool = False) -> dict[str, Any]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        hub = hub_of(request)
        async with self._lock:
            generation = hub.generation
            stale = time.monotonic() - self._at > SNAPSHOT_SECONDS
            if fresh or stale or self._value is None or generation != self._generation:
                self._value = await call(
                    request,
                    overview,
                    None,
                    stale_seconds=live_worker_window(request),
                    minutes_kept=self._minutes,
                )
                self._generation, self._at = generation, time.monotonic()
            return self._value


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    snapshot: Snapshot = request.app.state.overview_snapshot
    # A page load reads afresh; the re-fetches an SSE tick causes share one load.
    is_refresh = request.headers.get("HX-Request") == "true"
    figures = await snapshot.get(request, fresh=not is_refresh)
    return render(request, "home/index.html", "home/_live.html", **figures)


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


@public
async def favicon(request: Request) -> Response:
    """Browsers ask for /favicon.ico whatever the page links: the same picture, cached."""
    return FileResponse(
        STATIC_DIR / "favicon.svg",
        media_type="image/svg+xml",
        headers={"cache-control": "public, max-age=86400"},
    )


routes = [
    Route("/", index, name="home"),
    Route("/healthz", healthz, name="healthz"),
    Route("/favicon.ico", favicon, name="favicon"),
]
