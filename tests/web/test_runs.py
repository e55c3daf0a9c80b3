"""Runs pages: filters, keyset paging, detail, and cancel / retry by role with CSRF."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import run_inserts, submission, transitions
from tests.helpers.people import csrf_of


def submit(db_url: str, handler: str, n: int = 1) -> list[int]:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return [submission.submit(conn, run_inserts.NewRun(handler=handler)).id for _ in range(n)]


def _fail(db_url: str, error: str) -> int:
    """A run that ran once and failed for good with `error`."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        run_id = submission.submit(conn, run_inserts.NewRun(handler="flaky", max_retries=0)).id
        claimed = transitions.claim(conn, "w-test", 10, 30)
        assert [j.run_id for j in claimed] == [run_id]
        outcome = Outcome(OutcomeStatus.FAILED, error=error, traceback="Traceback: boom")
        transitions.finish_many(conn, "w-test", [transitions.Finish(run_id, 1, outcome)])
        return run_id


def _ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr id="run-(\d+)"', html)]


def test_runs_are_listed_newest_first_and_paged_by_id(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    ids = submit(db_url, "noop", 120)
    client = as_role("viewer")
    first = client.get("/runs")
    assert first.status_code == 200
    assert _ids(first.text) == sorted(ids, reverse=True)[:50]
    older = re.search(r'href="(/runs\?before=\d+)" rel="next"', first.text)
    assert older, "no link to older runs"
    second = client.get(older[1])
    assert _ids(second.text) == sorted(ids, reverse=True)[50:100]
    third = client.get(re.search(r'href="(/runs\?before=\d+)" rel="next"', second.text)[1])
    assert _ids(third.text) == sorted(ids, reverse=True)[100:]
    assert 'rel="next"' not in third.text


def test_filters_by_status_job_and_error_text(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    failed = _fail(db_url, "ValueError: disk 50% full")
    _fail(db_url, "KeyError: other")
    pending = submit(db_url, "noop", 3)
    client = as_role("viewer")
    assert sorted(_ids(client.get("/runs", params={"status": "pending"}).text)) == pending
    assert _ids(client.get("/runs", params={"error": "50% FULL"}).text) == [failed]
    assert len(_ids(client.get("/runs", params={"job": "flaky"}).text)) == 2
    # the htmx request gets the table only
    fragment = client.get("/runs", params={"status": "failed"}, headers={"HX-Request": "true"})
    assert fragment.text.lstrip().startswith('<div id="runs-table"')
    assert len(_ids(fragment.text)) == 2


def test_a_bad_filter_is_a_422_in_words(as_role: Callable[[str], TestClient]) -> None:
    client = as_role("viewer")
    response = client.get("/runs", params={"status": "exploded"})
    assert response.status_code == 422
    assert "status must be one of" in response.text
    response = client.get("/runs", params={"dag_run": "not-a-uuid"})
    assert response.status_code == 422 and "is not a DAG run id" in response.text
    response = client.get("/runs", params={"from": "yesterday"})
    assert response.status_code == 422 and "From must be a date and time" in response.text


def test_run_detail_shows_every_attempt_with_its_worker_and_error(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    run_id = _fail(db_url, "ValueError: bad row 7")
    client = as_role("viewer")
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    assert 'id="attempt-1"' in page.text
    assert "<code>w-test</code>, fencing token 1" in page.text
    assert "ValueError: bad row 7" in page.text and "Traceback: boom" in page.text
    # a viewer sees no buttons
    assert "Retry run" not in page.text
    assert client.get("/runs/999999").status_code == 404
    assert client.get("/runs/abc").status_code == 404


def test_an_operator_retries_and_cancels_and_both_are_audited(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    run_id = _fail(db_url, "boom")
    client = as_role("operator")
    page = client.get(f"/runs/{run_id}")
    assert "Retry run" in page.text
    token = csrf_of(client, f"/runs/{run_id}")
    retried = client.post(f"/runs/{run_id}/retry", data={"csrf_token": token})
    assert retried.status_code == 200 and f"Run {run_id} queued again." in retried.text
    cancelled = client.post(f"/runs/{run_id}/cancel", data={"csrf_token": token})
    assert cancelled.status_code == 200 and f"Run {run_id} cancelled." in cancelled.text
    again = client.post(f"/runs/{run_id}/cancel", data={"csrf_token": token})
    assert again.status_code == 409 and "already ended cancelled" in again.text
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT actor, action, details FROM audit_log WHERE target_type = 'run' ORDER BY id"
        ).fetchall()
    assert [(r["actor"], r["action"]) for r in rows] == [
        ("operator", "run.retry"),
        ("operator", "run.cancel"),
    ]
    assert rows[0]["details"]["before"]["status"] == "failed"
    assert rows[0]["details"]["after"]["status"] == "pending"


def test_cancel_and_retry_need_the_operator_role_and_a_csrf_token(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    (run_id,) = submit(db_url, "noop")
    client = as_role("viewer")
    token = csrf_of(client, f"/runs/{run_id}")
    refused = client.post(f"/runs/{run_id}/cancel", data={"csrf_token": token})
    assert refused.status_code == 403
    client = as_role("operator")
    no_token = client.post(f"/runs/{run_id}/cancel", data={})
    assert no_token.status_code == 403 and "security token" in no_token.text
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        row: Any = conn.execute("SELECT status FROM job_runs WHERE id = %s", [run_id]).fetchone()
    assert row["status"] == "pending"
