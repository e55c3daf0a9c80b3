"""DAG runs pages: the recent DAG runs, and one DAG run drawn as a picture whose steps are
coloured by status — through `app.dags.dag_runs`.

While a DAG run has steps pending, blocked or running, its picture (the `_graph.html`
fragment) re-fetches itself on every `runs` tick of the event stream (`app.web.events`),
so steps change colour as they finish. The same fragment carries the DAG run's timeline
(`app.dags.dag_timeline`): each step as a bar over one time axis, with the same facts in
words (`step_story`) in a table under it.
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
from app.dags import dag_runs, dag_timeline
from app.people.roles import Role
from app.web.access import requires
from app.web.database import call
from app.web.render import duration, env, render

# What each kind of segment means, in the legend and the table.
KIND_WORDS = {
    "waiting": "waiting for the steps before it",
    "queued": "waiting for a free worker",
    "ran": "running",
    "failed": "an attempt that failed",
    "paused": "an attempt put off (snoozed or handed back)",
    "retrying": "waiting to try again",
}


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def step_story(bar: dag_timeline.Bar) -> str:
    """A step's bar in words: "waited 3 s for its upstreams, ran 12 s, 1 retry"."""
    parts = []
    if waited := bar.total("waiting"):
        parts.append(f"waited {duration(waited)} for the steps before it")
    if queued := bar.total("queued"):
        parts.append(f"waited {duration(queued)} for a worker")
    ran = bar.total("ran") + bar.total("failed") + bar.total("paused")
    if bar.attempts:
        parts.append(f"ran {duration(ran)}")
    if bar.retries:
        failed = f", {bar.failed_attempts} failed" if bar.failed_attempts else ""
        tries = _plural(bar.attempts, "attempt", "attempts")
        parts.append(f"{_plural(bar.retries, 'retry', 'retries')} ({tries}{failed})")
    if backoff := bar.total("retrying"):
        parts.append(f"waited {duration(backoff)} to try again")
    if not parts:
        return "has not waited or run"
    if any(s.open for s in bar.segments):
        parts[-1] += " so far"
    return ", ".join(parts)


def segment_words(segment: dag_timeline.Segment) -> str:
    """One segment in words, for its tooltip: "attempt 2: failed, 4 s"."""
    what = KIND_WORDS[segment.kind]
    if segment.attempt is not None:
        outcome = (segment.outcome or "").replace("_", " ")
        what = f"attempt {segment.attempt}: {outcome}"
    return f"{what}, {duration(segment.seconds)}{' so far' if segment.open else ''}"


env.filters.update(step_story=step_story, segment_words=segment_words)
env.globals["TIMELINE_KIND_WORDS"] = KIND_WORDS


def _show_page(conn: Conn, dag_run_id: uuid.UUID) -> dict[str, Any]:
    found = dag_runs.picture(conn, dag_run_id)
    if found is None:
        raise HTTPException(404, "There is no such DAG run (it may have been pruned).")
    return {"dag": found, "timeline": dag_timeline.load(conn, dag_run_id)}


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
