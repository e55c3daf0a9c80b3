"""DAG runs pages: the recent DAG runs, and one DAG run drawn as a picture whose steps are
coloured by status — through `app.dags.dag_runs`.

While a DAG run has steps pending, blocked or running, its picture (the `_graph.html`
fragment) re-fetches itself on every `runs` tick of the event stream (`app.web.events`),
so steps change colour as they finish.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.dags import dag_runs
from app.people.roles import Role
from app.web.access import requires
from app.web.database import call
from app.web.render import render


def _show_page(conn: Conn, dag_run_id: uuid.UUID) -> dict[str, Any]:
    found = dag_runs.picture(conn, dag_run_id)
    if found is None:
        raise HTTPException(404, "There is no such DAG run (it may have been pruned).")
    return {"dag": found}


def _before(request: Request) -> datetime | None:
    text = request.query_params.get("before")
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise HTTPException(422, "The page link is broken: `before` is not a time.") from None
    if moment.tzinfo is None:
        raise HTTPException(422, "The page link is broken: `before` has no time zone.")
    return moment


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    before = _before(request)
    rows = await call(request, dag_runs.recent, before=before)
    more = rows[-1]["created_at"].isoformat() if len(rows) == dag_runs.PAGE_SIZE else None
    return render(request, "dag_runs/index.html", "dag_runs/_table.html",
                  dag_runs=rows, more=more, paged=before is not None)  # fmt: skip


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    page = await call(request, _show_page, request.path_params["dag_run_id"])
    return render(request, "dag_runs/show.html", "dag_runs/_graph.html", **page)


routes = [
    Route("/dag-runs", index, methods=["GET"], name="dag_runs_index"),
    Route("/dag-runs/{dag_run_id:uuid}", show, methods=["GET"], name="dag_runs_show"),
]
