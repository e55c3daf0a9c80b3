"""Backfills over the JSON API: a dry run previews and creates nothing, a start creates
one (audited under the token's user), the list shows its progress, cancel cancels it;
bad ranges are 422 with a sentence naming the field, unknown names and ids 404, and the
operations are in the OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from app.core.config import Settings
from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import create_schedule
from app.services.trigger import Trigger
from app.web import create_app
from tests.helpers.api_client import make_token
from tests.helpers.schedules import settings

Conn = psycopg.Connection[Any]
URL = "/api/v1/schedules/hourly/backfills"
RANGE = {"start": "2026-10-25T00:00", "end": "2026-10-25T04:00", "concurrency": 2}


@pytest.fixture
def api(db_url: str) -> Iterator[TestClient]:
    app_settings = Settings.from_env({"DATABASE_URL": db_url, "SECRET_KEY": "test-secret-key"})
    with TestClient(create_app(app_settings, db_url)) as client:
        client.headers["authorization"] = f"Bearer {make_token(db_url, 'operator', 'write')}"
        yield client


@pytest.fixture
def hourly(conn: Conn) -> None:
    spec = ScheduleSpec(name="hourly", cron="0 * * * *", timezone="Europe/Berlin",
                        handler="noop", overlap=OverlapPolicy.ALLOW)  # fmt: skip
    create_schedule(conn, spec)


def test_dry_run_start_list_and_cancel(api: TestClient, conn: Conn, hourly: None) -> None:
    dry = api.post(URL, json={**RANGE, "dry_run": True})
    assert dry.status_code == 200
    doc = dry.json()
    assert doc["backfill_id"] is None and doc["count"] == 6 and doc["at_once"] == 2
    assert doc["first"]["at"] == "2026-10-24T22:00:00Z"
    assert doc["first"]["local_time"] == "2026-10-25T00:00:00"
    assert [c["local_time"] for c in doc["clock_changes"]] == ["2026-10-25T02:00:00"] * 2
    assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone() == {"n": 0}

    started = api.post(URL, json=RANGE)
    assert started.status_code == 201
    backfill_id = started.json()["backfill_id"]
    Trigger(settings()).run_once(conn)
    (listed,) = api.get(URL).json()["backfills"]
    assert (listed["id"], listed["status"], listed["fire_count"]) == (backfill_id, "running", 6)
    assert (listed["waiting"], listed["running"], listed["done"]) == (6, 0, 0)

    cancelled = api.post(f"{URL}/{backfill_id}/cancel")
    assert cancelled.status_code == 200
    body = cancelled.json()
    assert (body["cancelled"], body["asked_to_stop"]) == (2, 0)
    assert (body["backfill"]["status"], body["backfill"]["not_run"]) == ("cancelled", 4)
    again = api.post(f"{URL}/{backfill_id}/cancel")
    assert again.status_code == 409 and "already cancelled" in again.json()["error"]["message"]
    actions = conn.execute(
        "SELECT action FROM audit_log WHERE action LIKE 'schedule.backfill%' ORDER BY id"
    ).fetchall()
    assert [a["action"] for a in actions] == ["schedule.backfill", "schedule.backfill_cancel"]


def test_bad_input_is_a_sentence_and_unknown_names_are_404(
    api: TestClient, conn: Conn, hourly: None
) -> None:
    backwards = api.post(URL, json={**RANGE, "start": "2026-10-26T00:00"})
    assert backwards.status_code == 422
    assert backwards.json()["error"] == {
        "message": "the end of the range is before its start; swap them", "field": "end"
    }  # fmt: skip
    too_many = api.post(URL, json={**RANGE, "start": "2024-01-01T00:00"})
    assert too_many.status_code == 422 and "10,000" in too_many.json()["error"]["message"]
    assert api.post("/api/v1/schedules/nope/backfills", json=RANGE).status_code == 404
    missing = api.post(f"{URL}/00000000-0000-0000-0000-000000000000/cancel")
    assert missing.status_code == 404
    assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone() == {"n": 0}


def test_the_openapi_document_lists_the_backfill_operations(api: TestClient) -> None:
    paths = api.get("/api/v1/openapi.json").json()["paths"]
    assert set(paths["/api/v1/schedules/{name}/backfills"]) == {"get", "post"}
    assert "post" in paths["/api/v1/schedules/{name}/backfills/{id}/cancel"]
