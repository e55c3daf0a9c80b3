"""The Queues page and the queue API: every queue in use with its depth and pause, paused
and resumed by an operator (audited), refused to a viewer, and the same over the API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from app.runs import submission
from app.runs.run_inserts import NewRun
from tests.helpers.api_client import api_as
from tests.helpers.web import post


def test_the_page_lists_queues_and_an_operator_pauses_and_resumes_one(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    for _ in range(3):
        submission.submit(conn, NewRun("noop", queue="reports"))
    client = as_role("operator")
    page = client.get("/queues")
    assert page.status_code == 200
    assert 'data-queue="reports"' in page.text and 'data-queue="default"' in page.text
    assert "Pause reports" in page.text

    paused = post(client, "/queues/reports/pause", {"note": "warehouse migration"})
    assert paused.status_code == 303 and "done=paused" in paused.headers["location"]
    page = client.get(paused.headers["location"])
    assert "Queue paused" in page.text and "Resume reports" in page.text
    assert "warehouse migration" in page.text

    resumed = post(client, "/queues/reports/resume", {})
    assert resumed.status_code == 303
    again = post(client, "/queues/reports/resume", {})
    assert again.status_code == 422 and "is not paused" in again.text
    audited = conn.execute(
        "SELECT actor, action FROM audit_log WHERE target_type = 'queue' ORDER BY id"
    ).fetchall()
    assert [(a["actor"], a["action"]) for a in audited] == [
        ("operator", "queue.pause"),
        ("operator", "queue.resume"),
    ]


def test_a_viewer_sees_queues_but_cannot_pause_them(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    client = as_role("viewer")
    page = client.get("/queues")
    assert page.status_code == 200 and "Pause default" not in page.text
    assert post(client, "/queues/default/pause", {}).status_code == 403
    assert conn.execute("SELECT count(*) AS n FROM queues").fetchone() == {"n": 0}


def test_the_api_lists_pauses_and_resumes_queues(db_url: str, conn: Any) -> None:
    submission.submit(conn, NewRun("noop", queue="reports"))
    with api_as(db_url, "operator") as api, api_as(db_url, "viewer") as viewer:
        _api_pauses_and_resumes(api, viewer)


def _api_pauses_and_resumes(api: TestClient, viewer: TestClient) -> None:
    listed = api.get("/api/v1/queues").json()["queues"]
    assert {q["name"]: q["pending"] for q in listed} == {"default": 0, "reports": 1}

    paused = api.post("/api/v1/queues/reports/pause", json={"note": "hold"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused"] is True and paused.json()["paused_note"] == "hold"
    refused = api.post("/api/v1/queues/default/resume")
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "queue"
    assert api.post("/api/v1/queues/reports/resume").json()["paused"] is False
    assert viewer.post("/api/v1/queues/reports/pause", json={}).status_code == 403


def test_metrics_give_each_queues_depth_wait_and_pause(db_url: str, conn: Any) -> None:
    for _ in range(3):
        submission.submit(conn, NewRun("noop", queue="reports"))
    submission.submit(conn, NewRun("noop"))
    with api_as(db_url, "operator") as api:
        assert api.post("/api/v1/queues/reports/pause", json={}).status_code == 200
        exposed = api.get("/metrics").text
    assert 'sundial_queue_pending_runs{queue="reports"} 3.0' in exposed
    assert 'sundial_queue_pending_runs{queue="default"} 1.0' in exposed
    assert 'sundial_queue_paused{queue="reports"} 1.0' in exposed
    assert 'sundial_queue_paused{queue="default"}' not in exposed
    assert 'sundial_queue_oldest_due_age_seconds{queue="reports"}' in exposed


def test_the_runs_page_and_the_cli_filter_runs_by_queue(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    from app.runs import run_list

    reports = submission.submit(conn, NewRun("noop", queue="reports")).id
    plain = submission.submit(conn, NewRun("noop")).id
    page = as_role("viewer").get("/runs?queue=reports")
    assert page.status_code == 200
    assert f'href="/runs/{reports}"' in page.text and f'href="/runs/{plain}"' not in page.text
    listed = run_list.list_runs(conn, run_list.RunFilter(queue="default")).runs
    assert [r["id"] for r in listed] == [plain]


def test_an_operator_sets_a_queues_limits_in_plain_words(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    submission.submit(conn, NewRun("noop", queue="partner"))
    client = as_role("operator")
    assert "Change limits of partner" in client.get("/queues").text
    form = client.get("/queues/partner/limits")
    assert form.status_code == 200 and "At most this many of its runs at once" in form.text

    saved = post(
        client,
        "/queues/partner/limits",
        {"max_running": "5", "key_field": "customer_id", "key_max_running": "1"},
    )
    assert saved.status_code == 303 and "done=limited" in saved.headers["location"]
    page = client.get(saved.headers["location"])
    assert "Limits saved" in page.text
    assert "At most 5 at once" in page.text and "At most 1 at once per customer_id" in page.text
    assert 'value="customer_id"' in client.get("/queues/partner/limits").text

    rated = post(client, "/queues/partner/limits",
                 {"rate_limit": "20", "rate_period_seconds": "1", "rate_burst": "5"})  # fmt: skip
    assert rated.status_code == 303
    page = client.get("/queues")
    assert "At most 20 starts every 1 s (5 at once after a quiet spell)" in page.text
    assert "At most 5 at once" not in page.text  # the form replaces every limit
    per_key = post(client, "/queues/partner/limits",
                   {"key_field": "customer_id", "rate_limit": "1", "rate_period_seconds": "60",
                    "rate_per_key": "yes"})  # fmt: skip
    assert per_key.status_code == 303
    assert "At most 1 start every 1 min for each customer_id" in client.get("/queues").text
    assert "checked" in client.get("/queues/partner/limits").text

    removed = post(client, "/queues/partner/limits", {"max_running": "", "key_field": "",
                                                      "key_max_running": ""})  # fmt: skip
    assert removed.status_code == 303
    row = conn.execute("SELECT max_running, key_field FROM queues WHERE name = 'partner'")
    assert row.fetchone() == {"max_running": None, "key_field": None}


def test_bad_limits_on_the_page_are_refused_beside_their_box_and_change_nothing(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    client = as_role("operator")
    cases = [
        ({"max_running": "five"}, "max_running", "The most at once must be a whole number"),
        ({"max_running": "0"}, "max_running", "must be between 1 and 1,000,000"),
        ({"key_field": "customer_id"}, "key_max_running", "a limit per key needs both"),
        ({"key_max_running": "2"}, "key_field", "a limit per key needs both"),
        ({"rate_limit": "20"}, "rate_period_seconds", "a rate needs its period in seconds"),
        ({"rate_period_seconds": "60"}, "rate_period_seconds", "a rate needs how many starts"),
        (
            {"rate_limit": "2", "rate_period_seconds": "1", "rate_burst": "x"},
            "rate_burst",
            "The starts at once must be a whole number",
        ),
    ]
    for values, field, message in cases:
        refused = post(client, "/queues/partner/limits", values)
        assert refused.status_code == 422, values
        assert f'id="{field}-error"' in refused.text and message in refused.text, values
        assert 'aria-invalid="true"' in refused.text
    assert conn.execute("SELECT count(*) AS n FROM queues").fetchone() == {"n": 0}
    viewer = as_role("viewer")
    assert "Change limits" not in viewer.get("/queues").text
    assert viewer.get("/queues/partner/limits").status_code == 403
    assert post(viewer, "/queues/partner/limits", {"max_running": "1"}).status_code == 403


def test_the_api_sets_limits_and_refuses_half_a_key_limit(db_url: str, conn: Any) -> None:
    with api_as(db_url, "operator") as api, api_as(db_url, "viewer") as viewer:
        body = {"max_running": 3, "key_field": "customer_id", "key_max_running": 1}
        saved = api.put("/api/v1/queues/partner/limits", json=body)
        assert saved.status_code == 200, saved.text
        assert {k: saved.json()[k] for k in body} == body
        assert saved.json()["limits_by"].startswith("operator-write (api token ")

        half = api.put("/api/v1/queues/partner/limits", json={"key_field": "customer_id"})
        assert half.status_code == 422 and half.json()["error"]["field"] == "key_max_running"
        for bad in ({"max_running": 0}, {"max_running": "3"}, {"max_running": 2.5},
                    {"limit": 3}):  # fmt: skip
            refused = api.put("/api/v1/queues/partner/limits", json=bad)
            assert refused.status_code == 422, (bad, refused.text)
        listed = {q["name"]: q for q in api.get("/api/v1/queues").json()["queues"]}
        assert listed["partner"]["max_running"] == 3  # nothing refused was written
        rated = api.put(
            "/api/v1/queues/partner/limits", json={"rate_limit": 600, "rate_period_seconds": 60}
        )
        assert rated.status_code == 200, rated.text
        assert (rated.json()["rate_limit"], rated.json()["rate_burst"]) == (600, 1)
        assert rated.json()["max_running"] is None
        no_period = api.put("/api/v1/queues/partner/limits", json={"rate_limit": 5})
        assert no_period.status_code == 422
        assert no_period.json()["error"]["field"] == "rate_period_seconds"
        cleared = api.put("/api/v1/queues/partner/limits", json={})
        assert cleared.json()["max_running"] is None and cleared.json()["key_field"] is None
        assert viewer.put("/api/v1/queues/partner/limits", json={}).status_code == 403
        assert "/api/v1/queues/{name}/limits" in api.get("/api/v1/openapi.json").json()["paths"]


def test_metrics_give_each_queues_limits(db_url: str, conn: Any) -> None:
    from app.runs import queues

    queues.set_limits(conn, "partner", actor="a", max_running=4, key_field="customer",
                      key_max_running=1)  # fmt: skip
    queues.set_limits(conn, "reports", actor="a", max_running=2)
    queues.set_limits(conn, "partner-api", actor="a", rate_limit=30, rate_period_seconds=60)
    with api_as(db_url, "viewer") as api:
        exposed = api.get("/metrics").text
    assert 'sundial_queue_concurrency_limit{key="",queue="partner",scope="queue"} 4.0' in exposed
    assert (
        'sundial_queue_concurrency_limit{key="customer",queue="partner",scope="key"} 1.0' in exposed
    )
    assert 'sundial_queue_concurrency_limit{key="",queue="reports",scope="queue"} 2.0' in exposed
    assert 'queue="default",scope=' not in exposed
    assert 'sundial_queue_rate_limit_per_second{queue="partner-api"} 0.5' in exposed
    assert 'sundial_queue_rate_limit_per_second{queue="partner"}' not in exposed


def test_an_operator_shares_a_queue_fairly_between_customers_with_weights(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    client = as_role("operator")
    saved = post(client, "/queues/partner/limits", {
        "key_field": "customer_id", "fair_share": "yes",
        "key_weights": "acme = 3\n\n  big co = 2  "})  # fmt: skip
    assert saved.status_code == 303, saved.text
    page = client.get("/queues").text
    assert "Fair turns per customer_id (acme 3 a turn, big co 2 a turn)" in page
    form = client.get("/queues/partner/limits").text
    assert "acme = 3\nbig co = 2" in form and 'name="fair_share" value="yes" checked' in form
    for values, message in [
        ({"key_field": "customer_id", "fair_share": "yes", "key_weights": "acme"},
         "line 1 of the weights: write a key, &#39;=&#39; and a whole number, like acme = 3"),
        ({"key_field": "customer_id", "fair_share": "yes", "key_weights": "acme = 0"},
         "the weight of &#39;acme&#39; must be between 1 and 1,000"),
        ({"key_field": "customer_id", "key_weights": "acme = 2"}, "weights apply to fair turns"),
        ({"fair_share": "yes"}, "a limit per key needs both"),
    ]:  # fmt: skip
        refused = post(client, "/queues/partner/limits", values)
        assert refused.status_code == 422 and message in refused.text, (values, refused.text)
    row = conn.execute("SELECT fair_share, key_weights FROM queues WHERE name = 'partner'")
    assert row.fetchone() == {"fair_share": True, "key_weights": {"acme": 3, "big co": 2}}
