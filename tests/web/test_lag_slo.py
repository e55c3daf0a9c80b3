"""Lag SLO page and fragments through the real application."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from tests.helpers.people import csrf_of
from tests.helpers.schedules import add
from tests.helpers.waits import db_now


def test_an_editor_sets_a_threshold_and_everyone_sees_the_lag(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        add(conn, "nightly <b>export</b>", now=db_now(conn), cron="0 2 * * *")
    client = as_role("editor")
    token = csrf_of(client, "/slo")
    bad = client.post(
        "/slo", data={"csrf_token": token, "schedule": "nightly <b>export</b>", "seconds": "soon"}
    )
    assert bad.status_code == 422 and 'id="seconds-error"' in bad.text
    unknown = client.post("/slo", data={"csrf_token": token, "schedule": "nope", "seconds": "5"})
    assert unknown.status_code == 422 and 'id="schedule-error"' in unknown.text
    saved = client.post(
        "/slo",
        data={"csrf_token": token, "schedule": "nightly <b>export</b>", "seconds": "120"},
        follow_redirects=True,
    )
    assert "Lag threshold of nightly &lt;b&gt;export&lt;/b&gt;: 120 s." in saved.text
    assert "fire → enqueue" in saved.text and "0 of 0" in saved.text
    alerts = client.get("/slo/alerts")
    assert alerts.text.lstrip().startswith('<section id="slo-alerts"')
    part = client.get("/slo/schedules/nightly%20%3Cb%3Eexport%3C%2Fb%3E")
    assert "Threshold" in part.text and "2 min" in part.text


def test_a_viewer_cannot_change_thresholds(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    client = as_role("viewer")
    assert "Set a threshold" not in client.get("/slo").text
    token = csrf_of(client, "/slo")
    refused = client.post("/slo", data={"csrf_token": token, "schedule": "x", "seconds": "5"})
    assert refused.status_code == 403
