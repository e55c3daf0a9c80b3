"""The job statistics page through the real application."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from tests.helpers.job_stats import ended
from tests.helpers.waits import db_now


def test_jobs_are_listed_most_failing_first_with_sparklines(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        now = db_now(conn)
        # two minutes back: the page counts minutes that have closed
        ended(conn, "steady", 0.2, at=now - timedelta(minutes=2))
        ended(conn, "<b>flaky</b>", 3, at=now - timedelta(minutes=2), ok=False)
    client = as_role("viewer")
    page = client.get("/job-stats")
    assert page.status_code == 200
    text = page.text
    assert text.index("&lt;b&gt;flaky&lt;/b&gt;") < text.index("steady")
    # one run each: the histogram's figure is clamped to it, exact
    assert "200 ms / 200 ms" in text and "100 %" in text and "<svg" in text
    assert "Runs that ended up to" in text and "±2.2 %" in text
    fragment = client.get("/job-stats?sort=busiest", headers={"HX-Request": "true"})
    assert fragment.text.lstrip().startswith('<div id="job-stats">')
    assert client.get("/job-stats?sort=nonsense").status_code == 200
