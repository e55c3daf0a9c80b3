"""The services jobs call, on the Queues page: each with its circuit breaker in plain words,
paused and let through by an operator (audited), refused to a viewer, its settings form
refusing bad values beside their boxes; the overview warns while one is not closed, and
/metrics gives each breaker's state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from app.catalog import job_definitions
from app.catalog.job_fields import JobSpec
from app.runs import breakers
from tests.helpers.api_client import api_as
from tests.helpers.web import post


def _job_calling(conn: Any, *services: str) -> None:
    spec = JobSpec.model_construct(name="charge", handler="noop", dependencies=list(services))
    job_definitions.create(conn, spec, actor="alice")


def test_the_queues_page_lists_services_and_an_operator_pauses_and_lets_one_through(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    client = as_role("operator")
    assert "No job names a service it calls yet." in client.get("/queues").text
    _job_calling(conn, "payments-api")
    page = client.get("/queues").text
    assert "payments-api</strong>:" in page and "Working" in page
    assert "No calls lately" in page
    paused = post(client, "/breakers/payments-api/open", {"note": "their maintenance"})
    assert paused.status_code == 303 and "done=service_paused" in paused.headers["location"]
    page = client.get(paused.headers["location"]).text
    assert "Paused by operator" in page and "their maintenance" in page
    assert "Let runs that call payments-api through" in page
    assert "Paused by operator" in client.get("/queues/services").text  # the live part
    overview = client.get("/").text
    assert "payments-api is paused by operator: the runs that call it wait" in overview
    again = post(client, "/breakers/payments-api/open", {})
    assert again.status_code == 422 and "already open" in again.text
    through = post(client, "/breakers/payments-api/close", {})
    assert through.status_code == 303
    assert "Working" in client.get("/queues").text
    assert "payments-api is" not in client.get("/").text
    actions = conn.execute("SELECT action FROM audit_log WHERE target_type = 'dependency'")
    assert [r["action"] for r in actions] == ["dependency.open", "dependency.closed"]


def test_a_service_paused_after_failures_says_why_and_when_it_tries_again(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    _job_calling(conn, "payments-api")
    conn.execute(
        "UPDATE dependencies SET state = 'open', reopen_at = now() + interval '30 seconds',"
        " note = '5 of its last 5 calls failed', changed_by = 'sundial'"
    )
    viewer = as_role("viewer")
    page = viewer.get("/queues").text
    assert "Paused after failures (5 of its last 5 calls failed), trying again at" in page
    assert "Let runs that call" not in page  # no buttons for a viewer
    assert "payments-api is failing" in viewer.get("/").text


def test_a_viewer_cannot_pause_a_service_or_change_its_settings(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    _job_calling(conn, "payments-api")
    viewer = as_role("viewer")
    assert post(viewer, "/breakers/payments-api/open", {}).status_code == 403
    assert viewer.get("/breakers/payments-api").status_code == 403
    assert post(viewer, "/breakers/payments-api", {"probes": "1"}).status_code == 403
    assert breakers.overview(conn)[0].state == "closed"


def test_an_operator_changes_a_services_settings_in_plain_words(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    _job_calling(conn, "payments-api")
    client = as_role("operator")
    form = client.get("/breakers/payments-api").text
    assert 'value="50"' in form and "Then let this many trial runs go" in form
    for values, field, message in [
        ({"failure_threshold": "half"}, "failure_threshold", "must be a percentage, like 50"),
        ({"failure_threshold": "150"}, "failure_threshold", "a share from 0 to 1"),
        ({"probes": "0"}, "probes", "the trial runs must be between 1 and 1,000"),
        ({"min_calls": "many"}, "min_calls", "must be a whole number"),
    ]:
        refused = post(client, "/breakers/payments-api", values)
        assert refused.status_code == 422, values
        assert f'id="{field}-error"' in refused.text and message in refused.text, values
    values = {"failure_threshold": "25", "min_calls": "10", "probes": "1", "retry_budget": "10 %"}
    saved = post(client, "/breakers/payments-api", values)
    assert saved.status_code == 303 and "done=service_settings" in saved.headers["location"]
    (b,) = breakers.overview(conn)
    assert (b.failure_threshold, b.min_calls, b.probes, b.retry_budget) == (0.25, 10, 1, 0.1)
    assert b.window_seconds == 60  # left empty: its usual value
    assert client.get("/breakers/nope").status_code == 404


def test_metrics_give_each_breakers_state_and_calls(db_url: str, conn: Any) -> None:
    _job_calling(conn, "payments-api", "ledger")
    breakers.open_by_hand(conn, "payments-api", actor="alice")
    with api_as(db_url, "viewer") as api:
        exposed = api.get("/metrics").text
    assert 'sundial_breaker_state{dependency="payments-api"} 2.0' in exposed
    assert 'sundial_breaker_state{dependency="ledger"} 0.0' in exposed
    assert 'sundial_breaker_retries_held{dependency="ledger"} 0.0' in exposed
    assert 'sundial_breaker_calls{dependency="ledger"} 0.0' in exposed
    assert 'sundial_breaker_failures{dependency="ledger"} 0.0' in exposed
