"""A run that moved to the history, at the dashboard, the JSON API and the command line: its
page (attempts, logs, events) with Re-run in place of Retry, the runs list and its search,
its DAG run's page, and a retry refused in words (409 / exit code 2), not "no such run"."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.core.config import Settings
from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission
from app.runs.run_inserts import NewRun
from app.services.reaper import Reaper
from tests.helpers.api_client import make_token
from tests.helpers.commands import run_sundial
from tests.helpers.people import csrf_of
from tests.helpers.processes import finish_run
from tests.helpers.waits import db_now

FAILED = Outcome(OutcomeStatus.FAILED, error="KeyError: 'rows'", retryable=False)


def _moved_runs(db_url: str) -> dict[str, Any]:
    """A run that logged a line and failed, another that completed, a DAG run of two steps:
    all moved to the history (as if 8 days had passed: dead letters move after a week)."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        failed = submission.submit(conn, NewRun("report", {"customer_id": 42})).id
        finish_run(conn, failed, FAILED)
        conn.execute("INSERT INTO run_logs VALUES (%s, 1, 1, now(), 'stdout', 'hello')", (failed,))
        done = submission.submit(conn, NewRun("report", {"customer_id": 7})).id
        finish_run(conn, done, Outcome.completed())
        dag = dag_submission.submit_dag(
            conn, {"a": NewRun("noop"), "b": NewRun("noop")}, [("a", "b")], name="nightly"
        )
        finish_run(conn, dag.run_ids["a"], Outcome.completed())
        finish_run(conn, dag.run_ids["b"], Outcome.completed())
        later = db_now(conn) + timedelta(days=8)
        assert Reaper(Settings.from_env({})).move_to_history(conn, later).runs == 4
        hot = conn.execute("SELECT count(*) AS n FROM job_runs").fetchone()
        assert hot == {"n": 0}
    return {"failed": failed, "done": done, "dag": dag}


def test_a_moved_runs_page_shows_it_whole_and_offers_a_re_run_not_a_retry(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    runs = _moved_runs(db_url)
    failed = runs["failed"]
    client = as_role("operator")
    page = client.get(f"/runs/{failed}")
    assert page.status_code == 200, page.text
    assert "KeyError: &#39;rows&#39;" in page.text and 'id="run-in-history"' in page.text
    assert "Retry run" not in page.text
    assert f'href="/runs/bulk?action=rerun&amp;scope=ticked&amp;run={failed}"' in page.text
    assert 'class="timeline events"' in page.text and "Attempt 1 started" in page.text
    confirm = client.get(f"/runs/bulk?action=rerun&scope=ticked&run={failed}")
    assert confirm.status_code == 200 and "Yes, re-run 1 run" in confirm.text
    assert "hello" in client.get(f"/runs/{failed}/logs").text

    token = csrf_of(client, f"/runs/{failed}")
    refused = client.post(f"/runs/{failed}/retry", data={"csrf_token": token})
    assert refused.status_code == 409
    assert f"Run {failed} ended at " in refused.text and "is in the history now" in refused.text

    listing = client.get("/runs", params={"search": "customer_id = 42"})
    assert f'href="/runs/{failed}"' in listing.text
    assert f'href="/runs/{runs["done"]}"' not in listing.text
    failed_only = client.get("/runs", params={"status": "failed"})
    assert f'href="/runs/{failed}"' in failed_only.text

    dag = runs["dag"]
    picture = client.get(f"/dag-runs/{dag.id}")
    assert picture.status_code == 200 and "dag-node status-completed" in picture.text
    assert f'href="/runs/{dag.run_ids["b"]}"' in picture.text
    assert f'href="/dag-runs/{dag.id}"' in client.get("/dag-runs").text
    step = client.get(f"/runs/{dag.run_ids['b']}")
    assert step.status_code == 200 and 'id="run-in-history"' in step.text
    assert "run-rerun" not in step.text  # a DAG step is not re-run alone


def test_the_api_reads_a_moved_run_and_refuses_to_retry_it_in_words(
    client: TestClient, db_url: str
) -> None:
    runs = _moved_runs(db_url)
    failed, dag = runs["failed"], runs["dag"]
    client.headers["authorization"] = f"Bearer {make_token(db_url)}"
    shown = client.get(f"/api/v1/runs/{failed}")
    assert shown.status_code == 200, shown.text
    body = shown.json()
    assert body["status"] == "failed" and len(body["attempts"]) == 1
    listed = client.get("/api/v1/runs", params={"search": "customer_id = 42"}).json()
    assert [r["id"] for r in listed["runs"]] == [failed]
    events = client.get(f"/api/v1/runs/{failed}/events").json()["events"]
    assert events[0]["kind"] == "submitted" and events[-1]["kind"] == "failed"
    assert client.get(f"/api/v1/dags/{dag.id}").status_code == 200
    timeline = client.get(f"/api/v1/dags/{dag.id}/timeline")
    assert timeline.status_code == 200, timeline.text

    for action in ("retry", "cancel"):
        refused = client.post(f"/api/v1/runs/{failed}/{action}")
        assert refused.status_code == 409
        message = refused.json()["error"]["message"]
        assert "is in the history now" in message and "re-run it instead" in message
    assert client.post("/api/v1/runs/999999/retry").status_code == 404


def test_the_command_line_shows_lists_and_refuses_a_moved_run(db_url: str) -> None:
    runs = _moved_runs(db_url)
    failed = str(runs["failed"])
    shown = run_sundial(db_url, "show", failed)
    assert shown.returncode == 0, shown.stderr
    assert '"status": "failed"' in shown.stdout and '"attempts": [' in shown.stdout
    listed = run_sundial(db_url, "runs", "list", "--search", "customer_id = 42")
    assert listed.returncode == 0 and listed.stdout.split()[0] == failed
    retried = run_sundial(db_url, "retry", failed)
    assert retried.returncode == 2
    assert "is in the history now" in retried.stderr
    assert f"sundial runs rerun --run {failed}" in retried.stderr
