"""Acting on many runs from the runs page and the API: the count in words before anything
happens, the action in the background, its progress, one audit entry, refusals."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.core.config import Settings
from app.runs import bulk_actions, run_inserts, submission, transitions
from app.runs.bulk_actions import BulkVerb, Selection
from app.runs.run_list import RunFilter
from app.web import create_app
from tests.helpers.api_client import make_token
from tests.helpers.people import csrf_of


def submit(db_url: str, handler: str, n: int) -> list[int]:
    runs = [run_inserts.NewRun(handler=handler, args={"i": i}) for i in range(n)]
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return [s.id for s in submission.submit_many(conn, runs)]


def one(db_url: str, sql: str) -> Any:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return conn.execute(sql).fetchone()


def wait_finished(db_url: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = one(db_url, "SELECT * FROM bulk_actions ORDER BY id DESC LIMIT 1")
        if row and row["status"] == "finished":
            return dict(row)
        time.sleep(0.1)
    raise AssertionError("the bulk action did not finish")


def test_an_operator_confirms_the_count_then_every_matching_run_is_cancelled(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    waiting = submit(db_url, "nightly-report", 1234)
    other = submit(db_url, "noop", 3)
    client = as_role("operator")
    page = client.get("/runs", params={"job": "nightly-report"})
    assert 'id="bulk-form"' in page.text and 'aria-label="Tick run' in page.text
    params = {"action": "cancel", "scope": "matching", "job": "nightly-report",
              "status": "pending"}  # fmt: skip
    confirm = client.get("/runs/bulk", params=params)
    assert confirm.status_code == 200
    assert "Cancel 1,234 runs matching: status pending, job nightly-report?" in confirm.text
    assert "Yes, cancel 1,234 runs" in confirm.text
    assert one(db_url, "SELECT count(*) AS n FROM bulk_actions")["n"] == 0  # nothing yet
    started = client.post(
        "/runs/bulk",
        data={**params, "csrf_token": csrf_of(client, "/runs")},
        follow_redirects=False,
    )
    assert started.status_code == 303
    assert started.headers["location"].startswith("/runs?status=pending&job=nightly-report")
    action = wait_finished(db_url)
    assert (action["total"], action["done"], action["skipped"]) == (1234, 1234, 0)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute("SELECT id, status FROM job_runs").fetchall()
        audit = conn.execute("SELECT * FROM audit_log WHERE actor = 'operator'").fetchall()
    by_id = {r["id"]: r["status"] for r in rows}
    assert {by_id[i] for i in waiting} == {"cancelled"}
    assert {by_id[i] for i in other} == {"pending"}
    assert len(audit) == 1 and audit[0]["action"] == "runs.bulk_cancel"
    assert audit[0]["details"]["after"]["count"] == 1234
    assert audit[0]["details"]["after"]["filter"] == {"status": "pending", "job": "nightly-report"}
    progress = client.get("/runs/bulk/progress", headers={"HX-Request": "true"})
    assert "Done: 1,234 cancelled." in progress.text


def test_ticked_runs_are_retried_and_the_rest_skipped_in_words(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    ids = submit(db_url, "noop", 3)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        transitions.cancel_many(conn, ids[:2])
    client = as_role("operator")
    params: dict[str, Any] = {"action": "retry", "scope": "ticked", "run": [str(i) for i in ids]}
    confirm = client.get("/runs/bulk", params=params)
    assert "Retry 3 ticked runs (#" in confirm.text
    token = csrf_of(client, "/runs")
    client.post("/runs/bulk", data={**params, "csrf_token": token}, follow_redirects=False)
    action = wait_finished(db_url)
    assert (action["done"], action["skipped"]) == (2, 1)
    progress = client.get("/runs/bulk/progress").text
    skipped = "1 skipped (they had not failed, timed out or been cancelled, or are in the history"
    assert "2 queued again, " + skipped in progress


def test_refusals_are_sentences_and_viewers_cannot_act(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    client = as_role("operator")
    bad = client.get("/runs/bulk", params={"action": "cancel", "status": "exploded"})
    assert bad.status_code == 422 and "status must be one of" in bad.text
    none = client.get("/runs/bulk", params={"action": "cancel", "scope": "ticked"})
    assert none.status_code == 422 and "tick at least one run" in none.text
    verb = client.get("/runs/bulk", params={"action": "explode"})
    assert verb.status_code == 422 and "cancel, retry or re-run" in verb.text
    empty = client.get("/runs/bulk", params={"action": "cancel", "status": "failed"})
    assert "None match now, so there is nothing to do" in empty.text
    viewer = as_role("viewer")
    assert 'id="bulk-form"' not in viewer.get("/runs").text
    assert viewer.get("/runs/bulk", params={"action": "cancel"}).status_code == 403


def test_the_api_starts_an_action_and_tells_how_far_it_got(client: TestClient, db_url: str) -> None:
    submit(db_url, "noop", 5)
    client.headers["authorization"] = f"Bearer {make_token(db_url, 'operator', 'write')}"
    started = client.post("/api/v1/runs/cancel", json={"filter": {"job": "noop"}})
    assert started.status_code == 202, started.text
    body = started.json()
    assert (body["action"], body["total"], body["described"]) == ("cancel", 5, "job noop")
    wait_finished(db_url)
    shown = client.get(f"/api/v1/bulk-actions/{body['id']}").json()
    assert (shown["status"], shown["done"], shown["skipped"]) == ("finished", 5, 0)
    again = client.post("/api/v1/runs/retry", json={"ids": [1, 2, 999]})
    assert again.status_code == 202
    retried = wait_finished(db_url)
    assert (retried["done"], retried["skipped"]) == (2, 1)
    rerun = client.post("/api/v1/runs/rerun", json={"filter": {"status": "cancelled"}})
    assert rerun.status_code == 202 and rerun.json()["total"] == 3
    assert (wait_finished(db_url)["done"]) == 3
    assert one(db_url, "SELECT count(*) AS n FROM job_runs WHERE status = 'pending'")["n"] == 5
    both = client.post("/api/v1/runs/rerun", json={"ids": [1], "filter": {}})
    assert both.status_code == 422 and "either filter or ids" in both.json()["error"]["message"]
    bad = client.post("/api/v1/runs/cancel", json={"filter": {"status": "exploded"}})
    assert bad.status_code == 422
    nul = client.post("/api/v1/runs/cancel", json={"filter": {"error": "a\u0000b"}})
    assert nul.status_code == 422 and "NUL" in nul.json()["error"]["message"]
    naive = client.post("/api/v1/runs/cancel", json={"filter": {"since": "2030-01-01T00:00"}})
    assert naive.status_code == 422 and "time zone" in naive.json()["error"]["message"]
    unknown = client.post("/api/v1/runs/cancel", json={"filter": {"colour": "red"}})
    assert unknown.status_code == 422
    assert client.get("/api/v1/bulk-actions/999").status_code == 404
    doc = client.get("/api/v1/openapi.json").json()
    assert "/api/v1/runs/cancel" in doc["paths"] and "/api/v1/runs/rerun" in doc["paths"]


def test_a_web_process_goes_on_with_an_action_a_stopped_process_left_half_done(
    db_url: str,
) -> None:
    submit(db_url, "noop", 2200)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        selection = Selection(where=RunFilter(job="noop"))
        action_id = bulk_actions.start(
            conn, BulkVerb.CANCEL, selection, actor="alice", owner="web:gone:1"
        )
        assert bulk_actions.run_batch(conn, action_id, owner="web:gone:1")  # then it died
        # its lease runs out (the clock moved on: the lease is set back instead)
        conn.execute("UPDATE bulk_actions SET lease_until = now() - interval '1 second'")
        assert "interrupted after 1,000 of 2,200" in bulk_actions.get(conn, action_id)["state"]
    settings = Settings.from_env({"DATABASE_URL": db_url, "SECRET_KEY": "test-secret-key"})
    with TestClient(create_app(settings, db_url)):  # a web process starts and looks
        action = wait_finished(db_url)
    assert (action["done"], action["skipped"], action["resumed"]) == (2200, 0, 1)
    assert action["owner"].startswith("web:") and action["owner"] != "web:gone:1"
