"""A run's history on its page and at GET /api/v1/runs/{id}/events: the events of a run a
worker failed, that people cancelled and retried through the page and the API, each with
its actor, oldest first; a 404 in words for an unknown run; the endpoint in the OpenAPI
document."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.core.config import Settings
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.web import create_app
from tests.helpers.api_client import make_token
from tests.helpers.people import csrf_of


@pytest.fixture
def api(db_url: str) -> Iterator[TestClient]:
    settings = Settings.from_env({"DATABASE_URL": db_url, "SECRET_KEY": "test-secret-key"})
    with TestClient(create_app(settings, db_url)) as client:
        client.headers["authorization"] = f"Bearer {make_token(db_url, username='robot')}"
        yield client


def _work(db_url: str, worker: str, outcome: Outcome) -> int:
    """A worker claims the one due run and reports `outcome`; the attempt number."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        (job,) = transitions.claim(conn, worker, 1, 30)
        finish = transitions.Finish(job.run_id, job.attempt, outcome)
        assert transitions.finish_many(conn, worker, [finish])
        return job.attempt


def _history(page: str) -> list[tuple[str, str]]:
    """The history's events as (what, who) a person reads them."""
    history = page.split('<ol class="timeline events"')[1].split("</ol>")[0]
    what = re.findall(r'<strong class="event-what">(.*?)</strong>', history)
    who = re.findall(r'<div class="event-who">(.*?)</div>', history)
    return list(zip(what, who, strict=True))


def test_the_api_tells_a_runs_events_with_their_actors(api: TestClient, db_url: str) -> None:
    submitted = api.post("/api/v1/runs", json={"handler": "report", "max_retries": 2})
    run_id = submitted.json()["run"]["id"]
    _work(db_url, "w-1", Outcome(OutcomeStatus.FAILED, error="KeyError: 'rows'"))
    assert api.post(f"/api/v1/runs/{run_id}/cancel").json()["status"] == "cancelled"
    assert api.post(f"/api/v1/runs/{run_id}/retry").status_code == 200

    answer = api.get(f"/api/v1/runs/{run_id}/events")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["run_id"] == run_id
    told = [(e["kind"], e["actor"]["kind"], e["actor"]["name"], e["attempt"])
            for e in body["events"]]  # fmt: skip
    assert told == [
        ("submitted", "unknown", None, None),
        ("started", "worker", "w-1", 1),
        ("retry_scheduled", "worker", "w-1", 1),
        ("cancelled", "api", "robot", None),
        ("retried", "api", "robot", None),
    ]
    failed = body["events"][2]
    assert failed["detail"] == "KeyError: 'rows'" and failed["until"] is None
    assert body["events"][3]["actor"]["words"].startswith("robot with API token ")
    assert all(e["at"] for e in body["events"])

    missing = api.get("/api/v1/runs/987654/events")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "there is no run 987654"
    document = api.get("/api/v1/openapi.json").json()
    operation = document["paths"]["/api/v1/runs/{run_id}/events"]["get"]
    assert set(operation["responses"]) >= {"200", "404"}
    assert "RunEventsOut" in document["components"]["schemas"]


def test_the_run_page_shows_its_history_with_who_did_what(
    as_role: Callable[[str], TestClient], db_url: str, conn: Any
) -> None:
    client = as_role("operator")
    run_id = submission.submit(conn, NewRun("report", max_retries=0)).id
    _work(db_url, "w-1", Outcome(OutcomeStatus.FAILED, error="ValueError: bad row 7"))
    token = csrf_of(client, f"/runs/{run_id}")
    assert client.post(f"/runs/{run_id}/retry", data={"csrf_token": token}).status_code == 200
    _work(db_url, "w-2", Outcome.completed())

    page = client.get(f"/runs/{run_id}").text
    assert _history(page) == [
        ("Submitted", "By unknown"),
        ("Attempt 1 started", "By worker w-1"),
        ("Failed for good: a dead letter, not tried again", "By worker w-1, attempt 1"),
        ("Retried, with a fresh retry budget", "By operator"),
        ("Attempt 2 started", "By worker w-2"),
        ("Completed", "By worker w-2, attempt 2"),
    ]
    assert "ValueError: bad row 7" in page.split('<ol class="timeline events"')[1]
    assert 'aria-labelledby="history-title"' in page and '<time datetime="' in page
