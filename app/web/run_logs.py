"""A run's log: the lines its handler logged and printed, attempt by attempt.

`/runs/{id}/logs` serves the page, or (for htmx) the `run_logs/_log.html` fragment that the
run page includes; while the run is pending or running the fragment re-fetches itself
every second, so new lines appear without a reload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people.roles import Role
from app.runs import run_logs
from app.web.access import requires
from app.web.database import call
from app.web.render import render

LIVE_STATUSES = ("pending", "running", "blocked")


def log_page(conn: Conn, run_id: int) -> dict[str, Any]:
    """What the fragment needs: the run, its lines, and whether to keep polling."""
    run = run_logs.run_summary(conn, run_id)
    if run is None:
        raise HTTPException(404, f"There is no run {run_id}.")
    lines = run_logs.lines_of(conn, run_id)
    return {
        "run": run,
        "log_lines": lines,
        "log_html": log_html(lines),
        "log_live": run["status"] in LIVE_STATUSES,
        "log_capped": len(lines) >= run_logs.LINES_SHOWN,
    }


def log_html(lines: Sequence[dict[str, Any]]) -> Markup:
    """The lines as the log block's rows, each escaped, with a marker where an attempt
    begins. Built here rather than by a template loop: a 5,000-line log renders in a few
    milliseconds instead of a hundred."""
    parts: list[str] = []
    attempt = None
    for line in lines:
        if line["attempt"] != attempt:
            attempt = line["attempt"]
            parts.append(f'<div class="meta">— attempt {attempt} —</div>')
        stream = escape(line["stream"])
        parts.append(
            f'<div class="{stream}"><span class="meta">{line["at"]:%H:%M:%S} {stream}</span> '
            f"{escape(line['line'])}</div>"
        )
    return Markup("".join(parts))  # every value above is escaped


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    page = await call(request, log_page, request.path_params["run_id"])
    return render(request, "run_logs/show.html", "run_logs/_log.html", **page)


routes = [Route("/runs/{run_id:int}/logs", show, methods=["GET"], name="run_logs_show")]
