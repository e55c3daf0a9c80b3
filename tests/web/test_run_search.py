"""Finding runs by what they carried, through every door: the runs list (`RunFilter.search`),
the runs page, the API and `sundial runs list`. Numbers match their string too, quotes only
the string; nested fields; the result; runs in every state; with the other filters; paged."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from app.core.config import Settings
from app.core.errors import UsageError
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import bulk_actions, run_inserts, run_list, submission, transitions
from app.runs.run_list import RunFilter
from app.web import create_app
from tests.helpers.api_client import make_token
from tests.helpers.commands import run_sundial
from tests.helpers.people import csrf_of

Runs = dict[str, int]


def _submit(conn: psycopg.Connection[Any], args: dict[str, Any], priority: int = 1) -> int:
    new = run_inserts.NewRun(handler="noop", args=args, priority=priority, max_retries=0)
    return submission.submit(conn, new).id


@pytest.fixture
def runs(conn: psycopg.Connection[Any]) -> Runs:
    """Ended runs (found by the index) and waiting and running ones (by their status)."""
    made = {
        "number": _submit(conn, {"customer_id": 42}),
        "string": _submit(conn, {"customer_id": "42"}),
        "eu": _submit(conn, {"customer_id": 7, "order": {"region": "eu", "lines": 3}}),
        "zero": _submit(conn, {"customer_id": "042"}),
    }
    claimed = {c.run_id: c for c in transitions.claim(conn, "w-test", 10, 30)}
    assert sorted(claimed) == sorted(made.values())
    ok = OutcomeStatus.COMPLETED
    outcomes = {
        made["number"]: Outcome(ok, result={"total": 3}),
        made["string"]: Outcome(ok, result="ok"),
        made["eu"]: Outcome(OutcomeStatus.FAILED, error="boom", retryable=False),
        made["zero"]: Outcome(ok, result={"total": "3"}),
    }
    finishes = [transitions.Finish(i, claimed[i].attempt, o) for i, o in outcomes.items()]
    transitions.finish_many(conn, "w-test", finishes)
    made["running"] = _submit(conn, {"customer_id": 42}, priority=5)
    made["pending"] = _submit(conn, {"customer_id": 42, "order": {"region": "us"}})
    assert [c.run_id for c in transitions.claim(conn, "w-test", 1, 30)] == [made["running"]]
    return made


def _found(conn: psycopg.Connection[Any], search: str, **other: Any) -> list[int]:
    return [r["id"] for r in run_list.list_runs(conn, RunFilter(search=search, **other)).runs]


def test_a_number_finds_the_number_and_the_string_in_every_state(
    conn: psycopg.Connection[Any], runs: Runs
) -> None:
    expected = [runs["pending"], runs["running"], runs["string"], runs["number"]]
    assert _found(conn, "customer_id = 42") == expected
    assert _found(conn, 'customer_id = "42"') == [runs["string"]]
    assert _found(conn, "customer_id = 042") == [runs["zero"]]


def test_nested_fields_several_conditions_and_the_result(
    conn: psycopg.Connection[Any], runs: Runs
) -> None:
    assert _found(conn, "order.region = eu") == [runs["eu"]]
    assert _found(conn, "customer_id = 42 and order.region = us") == [runs["pending"]]
    assert _found(conn, "order.lines = 3 and customer_id = 7") == [runs["eu"]]
    assert _found(conn, "result.total = 3") == [runs["zero"], runs["number"]]
    assert _found(conn, "result = ok") == [runs["string"]]
    assert _found(conn, "customer_id = 42 and result.total = 3") == [runs["number"]]


def test_no_match_is_an_empty_page(conn: psycopg.Connection[Any], runs: Runs) -> None:
    page = run_list.list_runs(conn, RunFilter(search="customer_id = 99"))
    assert page.runs == [] and page.older is None
    assert _found(conn, "order.region = EU") == []  # strings match exactly, case and all
    assert _found(conn, "customer = 42") == []


def test_the_search_narrows_the_other_filters(conn: psycopg.Connection[Any], runs: Runs) -> None:
    assert _found(conn, "customer_id = 42", status="completed") == [runs["string"], runs["number"]]
    assert _found(conn, "customer_id = 42", status="pending") == [runs["pending"]]
    assert _found(conn, "customer_id = 7", status="failed", error="boom") == [runs["eu"]]
    assert _found(conn, "customer_id = 42", before_id=runs["string"]) == [runs["number"]]


def test_a_search_is_paged_by_id(conn: psycopg.Connection[Any]) -> None:
    ids = [_submit(conn, {"batch": n % 2, "n": n}) for n in range(9)]
    wanted = [i for n, i in enumerate(ids) if n % 2 == 0][::-1]
    where = RunFilter(search="batch = 0", limit=2)
    shown: list[int] = []
    while True:
        page = run_list.list_runs(conn, where)
        shown += [r["id"] for r in page.runs]
        if page.older is None:
            break
        assert page.older.search == "batch = 0"
        where = page.older
    assert shown == wanted


def test_a_search_that_cannot_be_read_is_refused_in_words() -> None:
    with pytest.raises(UsageError, match="Write the search as field = value"):
        RunFilter(search="customer_id 42").check()


@pytest.fixture
def api(db_url: str) -> Iterator[TestClient]:
    settings = Settings.from_env({"DATABASE_URL": db_url, "SECRET_KEY": "test-secret-key"})
    with TestClient(create_app(settings, db_url)) as client:
        client.headers["authorization"] = f"Bearer {make_token(db_url, 'viewer', 'read')}"
        yield client


def test_the_api_lists_runs_by_what_they_carried(api: TestClient, runs: Runs) -> None:
    answer = api.get("/api/v1/runs", params={"search": "customer_id = 42", "limit": 3})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [r["id"] for r in body["runs"]] == [runs["pending"], runs["running"], runs["string"]]
    assert body["next"] == runs["string"]
    older = api.get("/api/v1/runs", params={"search": "customer_id = 42", "before": body["next"]})
    assert [r["id"] for r in older.json()["runs"]] == [runs["number"]]
    nested = api.get("/api/v1/runs", params={"search": "order.region = eu", "status": "failed"})
    assert [r["id"] for r in nested.json()["runs"]] == [runs["eu"]]
    assert nested.json()["runs"][0]["args"]["order"] == {"region": "eu", "lines": 3}
    bad = api.get("/api/v1/runs", params={"search": "customer_id"})
    assert bad.status_code == 422
    assert "Write the search as field = value" in bad.json()["error"]["message"]
    assert bad.json()["error"]["field"] == "search"


def test_the_page_and_the_cli_search_too(db_url: str, as_role: Any, runs: Runs) -> None:
    client = as_role("viewer")
    page = client.get("/runs", params={"search": "order.region = eu"})
    assert page.status_code == 200
    assert f'id="run-{runs["eu"]}"' in page.text and f'id="run-{runs["number"]}"' not in page.text
    assert 'value="order.region = eu"' in page.text
    bad = client.get("/runs", params={"search": "order.region"})
    assert bad.status_code == 422 and "Write the search as field = value" in bad.text
    listed = run_sundial(db_url, "runs", "list", "--search", 'customer_id = "42"', "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [runs["string"]]
    refused = run_sundial(db_url, "runs", "list", "--search", "customer id = 42")
    assert refused.returncode == 2 and "'customer id' is not a field" in refused.stderr


def test_a_bulk_action_takes_the_runs_the_search_shows(
    conn: psycopg.Connection[Any], runs: Runs
) -> None:
    where = RunFilter(search="customer_id = 42")
    shown = _found(conn, "customer_id = 42")
    assert run_list.count_matching(conn, where) == (len(shown), shown[0])
    assert run_list.matching_ids(conn, where, before_id=None, limit=10) == shown
    described = bulk_actions.describe(bulk_actions.Selection(where=where))
    assert described == "carrying customer_id = 42"
    stored = bulk_actions.filter_from_json(bulk_actions.filter_json(where))
    assert stored.search == "customer_id = 42"


def test_an_operator_cancels_the_runs_a_search_shows_and_no_other(
    as_role: Any, conn: psycopg.Connection[Any], db_url: str, runs: Runs
) -> None:
    client = as_role("operator")
    params = {"action": "cancel", "scope": "matching", "search": "customer_id = 42"}
    confirm = client.get("/runs/bulk", params=params)
    assert confirm.status_code == 200
    # of the four runs with 42 or "42", the pending and the running one can be cancelled
    assert "Cancel 4 runs matching: carrying customer_id = 42?" in confirm.text
    started = client.post(
        "/runs/bulk",
        data={**params, "csrf_token": csrf_of(client, "/runs")},
        follow_redirects=False,
    )
    assert started.status_code == 303
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        action = conn.execute("SELECT * FROM bulk_actions").fetchone()
        if action and action["status"] == "finished":
            break
        time.sleep(0.1)
    assert action is not None and (action["done"], action["skipped"]) == (2, 2)
    rows = conn.execute("SELECT id, status FROM job_runs").fetchall()
    statuses = {r["id"]: r["status"] for r in rows}
    assert statuses[runs["pending"]] == "cancelled"
    assert statuses[runs["eu"]] == "failed" and statuses[runs["zero"]] == "completed"
    assert action["filter"] == {"search": "customer_id = 42"}
