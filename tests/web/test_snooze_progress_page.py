"""The run page shows a running job's progress in plain words, a snoozed run's reason and
when it runs again, and the snoozed attempt in its history; the JSON API reads the same."""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.testclient import TestClient

from app.handlers.jobs import Outcome, Snooze
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from app.web.render import progress_figure
from tests.helpers.api_client import api_as


def test_the_run_page_shows_progress_then_the_snooze(
    as_role: Callable[[str], TestClient], conn: Any, db_url: str
) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    viewer = as_role("viewer")
    # A waiting run's page follows reports too: the first may come while the refresh that
    # its start caused is in flight, and the page must not miss it.
    assert "sse:progress" in viewer.get(f"/runs/{run_id}").text
    now = datetime.now(UTC) + timedelta(seconds=1)
    (job,) = transitions.claim(conn, "w", 1, 30, now=now)
    page = viewer.get(f"/runs/{run_id}")
    assert 'id="run-progress"' not in page.text  # nothing reported yet
    assert "sse:progress" in page.text  # a running run's page follows its reports

    report = {(run_id, job.attempt): (40.0, "copied 40 of 100 <files>")}
    transitions.report_progress(conn, "w", report)
    page = viewer.get(f"/runs/{run_id}")
    assert '<progress max="100" value="40.0"' in page.text
    assert "40%</strong> — copied 40 of 100 &lt;files&gt;" in page.text  # escaped

    snooze = Snooze(3600, "the partner's export is not ready")
    transitions.finish_many(conn, "w", [Finish(run_id, job.attempt, Outcome.snoozed(snooze))])
    page = viewer.get(f"/runs/{run_id}")
    text = html.unescape(page.text)
    assert '<span class="badge status-pending">snoozed</span>' in text
    assert "Snoozed until " in text and ": the partner's export is not ready" in text
    assert "put it back for later 1 time, without using an attempt" in text
    assert "Last progress reported" in text  # kept until the next attempt starts
    assert "sse:progress" not in page.text
    assert 'class="outcome-snoozed"' in page.text
    assert "Snoozed, put back for later without using an attempt: the partner" in text

    with api_as(db_url, "viewer") as api:
        read = api.get(f"/api/v1/runs/{run_id}").json()
    assert (read["snooze_count"], read["snooze_reason"]) == (1, snooze.reason)
    assert (read["progress"], read["progress_message"]) == (40, "copied 40 of 100 <files>")
    assert read["snoozed_until"] == read["run_at"]
    assert read["attempts"][0]["outcome"] == "snoozed"


def test_progress_that_is_not_a_percentage_is_shown_as_it_is(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    (job,) = transitions.claim(conn, "w", 1, 30)
    transitions.report_progress(conn, "w", {(run_id, job.attempt): (1234567, "rows copied")})
    page = as_role("viewer").get(f"/runs/{run_id}")
    assert "<progress" not in page.text
    assert "1,234,567</strong> — rows copied" in page.text


def test_progress_figures_read_plainly() -> None:
    assert [progress_figure(v) for v in (40.0, 12.5, 0.333333, 1234567.0, None)] == [
        "40", "12.5", "0.33", "1,234,567", "—"
    ]  # fmt: skip
