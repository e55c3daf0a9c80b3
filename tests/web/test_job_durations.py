"""A job's page shows how long its runs took over the week: the hourly chart, the hours as
a table and the slowest runs with links — from runs ended through the real transitions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.catalog import job_definitions
from app.catalog.job_definitions import JobSpec
from tests.helpers.job_stats import ended
from tests.helpers.waits import db_now


def test_the_job_page_charts_its_durations_and_links_its_slowest_runs(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        job_definitions.create(conn, JobSpec(name="billing <b>", handler="noop"), actor="test")
        job_definitions.create(conn, JobSpec(name="quiet", handler="noop"), actor="test")
        job_id = job_definitions.get(conn, "billing <b>")["id"]
        now = db_now(conn)
        slow = ended(conn, "noop", 95, at=now - timedelta(hours=3), job_id=job_id, ok=False)
        quick = [ended(conn, "noop", s, at=now - timedelta(minutes=20), job_id=job_id)
                 for s in (2, 4)]  # fmt: skip
    client = as_role("viewer")
    page = client.get("/jobs/billing%20%3Cb%3E").text
    assert "How long its runs take" in page
    assert "-5 d 6 h" in page  # the axis in days and hours
    assert page.count('class="line-p95"') == 2  # hours with runs, hours apart: no line between them
    slowest = page[page.index("The slowest runs of the week") :]
    links = [f'href="/runs/{run_id}"' for run_id in (slow, quick[1], quick[0])]
    assert [slowest.index(link) for link in links] == sorted(slowest.index(x) for x in links)
    assert "1 min 35 s" in slowest and "failed" in slowest
    assert "The hours as a table" in page
    empty = client.get("/jobs/quiet").text
    assert "No run of this job ended in the last 7 days." in empty
