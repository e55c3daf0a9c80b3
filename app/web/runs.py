"""Runs pages: the list (filters, keyset paging), a run's detail (its history as events,
`app.runs.run_timeline`; its attempts; DAG neighbours), and cancel / retry for operators
through `app.runs.run_actions`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.errors import UsageError
from app.core.limits import whole_id
from app.core.sql import query
from app.people.roles import Role
from app.runs import bulk_actions, run_actions, run_list, run_timeline
from app.runs.run_list import RunFilter
from app.runs.states import RunStatus
from app.scheduling.zones import zone_named
from app.web.access import current_user, requires
from app.web.database import call
from app.web.render import render
from app.web.viewer_zone import DEFAULT_ZONE, viewer_zone

FILTER_FIELDS = ("status", "job", "schedule", "dag_run", "from", "to", "error", "queue", "search")
CANCELLABLE = frozenset({"pending", "blocked", "running"})
RETRYABLE = frozenset({"failed", "timed_out", "cancelled"})


def _moment(params: QueryParams, name: str, label: str, zone: str) -> datetime | None:
    """`2026-12-01T09:30` (the form's datetime-local, read on the viewer's clock, `zone`)
    or an ISO instant."""
    text = (params.get(name) or "").strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{label} must be a date and time like 2026-12-01T09:30") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=zone_named(zone))


def filter_of(params: QueryParams, zone: str = DEFAULT_ZONE) -> RunFilter:
    """The page's query string as a RunFilter, its times on the clock of `zone`;
    UsageError names what is wrong."""
    before = (params.get("before") or "").strip()
    if before and whole_id(before) is None:
        raise UsageError("before must be a run id")
    dag_run = (params.get("dag_run") or "").strip()
    return RunFilter(
        status=params.get("status") or None,
        job=(params.get("job") or "").strip() or None,
        schedule=(params.get("schedule") or "").strip() or None,
        dag_run_id=run_list.parse_dag_run_id(dag_run) if dag_run else None,
        since=_moment(params, "from", "From", zone),
        until=_moment(params, "to", "To", zone),
        error=(params.get("error") or "").strip() or None,
        queue=(params.get("queue") or "").strip() or None,
        search=(params.get("search") or "").strip() or None,
        before_id=int(before) if before else None,
    ).check()


def _older_url(params: QueryParams, page: run_list.RunPage) -> str | None:
    if page.older is None or page.older.before_id is None:
        return None
    kept = {k: v for k in FILTER_FIELDS if (v := params.get(k))}
    return "/runs?" + urlencode({**kept, "before": page.older.before_id})


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    params = request.query_params
    context: dict[str, Any] = {
        # the panel of bulk actions (it follows by itself): on the page, not in the fragment
        "actions": []
        if request.headers.get("HX-Request") == "true"
        else await call(request, bulk_actions.recent),
        "filters": params,
        "statuses": [s.value for s in RunStatus],
        "filter_fields": FILTER_FIELDS,
    }
    try:
        where = filter_of(params, viewer_zone(request)[0])
    except UsageError as exc:
        return render(
            request,
            "runs/index.html",
            "runs/_table.html",
            status_code=422,
            runs=[],
            older_url=None,
            filter_error=str(exc),
            **context,
        )
    page = await call(request, run_list.list_runs, where)
    return render(
        request,
        "runs/index.html",
        "runs/_table.html",
        runs=page.runs,
        older_url=_older_url(params, page),
        newest_url=_newest_url(params),
        filter_error=None,
        **context,
    )


def _newest_url(params: QueryParams) -> str | None:
    if not params.get("before"):
        return None
    kept = {k: v for k in FILTER_FIELDS if (v := params.get(k))}
    return "/runs" + ("?" + urlencode(kept) if kept else "")


def run_page(conn: Conn, run_id: int) -> dict[str, Any]:
    run = conn.execute(query("web", "run_detail"), {"id": run_id}).fetchone()
    if run is None:
        raise HTTPException(404, f"There is no run {run_id}.")
    params = {"id": run_id}
    return {
        "run": run,
        "attempts": conn.execute(query("web", "run_detail_attempts"), params).fetchall(),
        "events": run_timeline.events_of_run(conn, run_id) or [],
        "upstreams": conn.execute(query("web", "run_detail_upstreams"), params).fetchall(),
        "downstreams": conn.execute(query("web", "run_detail_downstreams"), params).fetchall(),
        "cancellable": run["status"] in CANCELLABLE and not run["cancel_requested"],
        # A run in the history no longer changes: a re-run (a new run, same arguments) is
        # what is left, for the runs a re-run copies (outside a DAG run).
        "retryable": run["status"] in RETRYABLE and not run["in_history"],
        "rerunnable": run["in_history"] and run["dag_run_id"] is None,
    }


def _run_id(request: Request) -> int:
    text = request.path_params["run_id"]
    run_id = whole_id(text)
    if run_id is None:
        raise HTTPException(404, f"There is no run {text}.")
    return run_id


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    page = await call(request, run_page, _run_id(request))
    return render(request, "runs/show.html", "runs/_detail.html", message=None, **page)


def _cancel(conn: Conn, run_id: int, *, actor: str) -> str:
    if run_actions.cancel(conn, run_id, actor=actor) == "cancelled":
        return f"Run {run_id} cancelled."
    return f"Run {run_id} is running: its worker was asked to stop it."


def _retry(conn: Conn, run_id: int, *, actor: str) -> str:
    waiting = len(run_actions.retry(conn, run_id, actor=actor).unskipped)
    return f"Run {run_id} queued again." + (
        f" {waiting} skipped downstream step(s) wait for it again." if waiting else ""
    )


async def _act(request: Request, action: Callable[..., str]) -> Response:
    run_id = _run_id(request)
    actor = current_user(request).username
    try:
        message, kind, status = await call(request, action, run_id, actor=actor), "info", 200
    except run_actions.RunActionRefused as exc:
        message, kind, status = str(exc), "error", 409
    page = await call(request, run_page, run_id)
    return render(
        request, "runs/show.html", "runs/_detail.html", status_code=status,
        message=message, kind=kind, **page,
    )  # fmt: skip


@requires(Role.OPERATOR)
async def cancel(request: Request) -> Response:
    return await _act(request, _cancel)


@requires(Role.OPERATOR)
async def retry(request: Request) -> Response:
    return await _act(request, _retry)


routes = [
    Route("/runs", index, methods=["GET"], name="runs_index"),
    Route("/runs/{run_id}", show, methods=["GET"], name="runs_show"),
    Route("/runs/{run_id}/cancel", cancel, methods=["POST"], name="runs_cancel"),
    Route("/runs/{run_id}/retry", retry, methods=["POST"], name="runs_retry"),
]
