"""Per-job statistics page: the last 24 hours per job, most failing (or slowest, or
busiest) first — through `app.observability.job_stats`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.observability import job_stats
from app.people.roles import Role
from app.web import sparklines as sparklines  # registers the filter the templates use
from app.web.access import requires
from app.web.database import call
from app.web.render import render


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    sort = request.query_params.get("sort", "failing")
    if sort not in job_stats.SORTS:
        sort = "failing"
    report = await call(request, job_stats.stats, sort=sort)
    return render(request, "job_stats/index.html", "job_stats/_table.html",
                  jobs=report.jobs, through=report.through, sort=sort, hours=job_stats.HOURS,
                  precision=job_stats.PRECISION_PERCENT)  # fmt: skip


routes = [Route("/job-stats", index, methods=["GET"], name="job_stats_index")]
