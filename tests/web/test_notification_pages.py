"""The Notifications page through the real application: admins add, change and delete
channels (the address never comes back to the browser), operators add rules and send tests,
viewers are turned away; every change is audited."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from app.notify import channels, outbox, rules
from tests.helpers.api_client import api_as
from tests.helpers.receiver import receiver
from tests.helpers.web import post

KEY = "test-secret-key"  # the client fixture's SECRET_KEY
SECRET = "https://hooks.slack.com/services/T0/B0/TOPSECRETTOKEN"


def _channel_id(conn: psycopg.Connection[Any], name: str) -> Any:
    row = conn.execute("SELECT id FROM notification_channels WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return row["id"]


def test_an_admin_adds_a_slack_channel_shown_only_as_a_hint(
    as_role: Callable[[str], TestClient], conn: psycopg.Connection[Any]
) -> None:
    client = as_role("admin")
    added = post(
        client,
        "/notifications/channels",
        {"name": "On-call Slack", "kind": "slack", "url": SECRET, "per_minute": "10"},
    )
    assert added.status_code == 303
    page = client.get("/notifications")
    assert "Slack webhook …/T0/B0/•••• saved" in page.text
    assert "TOPSECRETTOKEN" not in page.text
    channel_id = _channel_id(conn, "On-call Slack")
    shown = client.get(f"/notifications/channels/{channel_id}")
    assert "TOPSECRETTOKEN" not in shown.text and "Empty: keep the saved one" in shown.text
    refused = post(
        client,
        "/notifications/channels",
        {"name": "Bad", "kind": "slack", "url": "https://example.com/x"},
    )
    assert refused.status_code == 422
    assert "Paste the Slack incoming-webhook address" in refused.text
    renamed = post(
        client,
        f"/notifications/channels/{channel_id}",
        {"name": "Night Slack", "per_minute": "5", "url": ""},
    )
    assert renamed.status_code == 303
    assert "Slack webhook …/T0/B0/•••• saved" in client.get(renamed.headers["location"]).text
    kept = post(client, f"/notifications/channels/{channel_id}/delete", {})
    assert kept.status_code == 422 and "Tick the box" in kept.text
    gone = post(client, f"/notifications/channels/{channel_id}/delete", {"confirm": "yes"})
    assert gone.status_code == 303
    actions = [
        r["action"]
        for r in conn.execute(
            "SELECT action FROM audit_log WHERE action LIKE 'notify.%%' ORDER BY id"
        ).fetchall()
    ]
    assert actions == ["notify.channel_create", "notify.channel_update", "notify.channel_delete"]
    details = conn.execute("SELECT string_agg(details::text, ' ') AS d FROM audit_log").fetchone()
    assert details is not None and "TOPSECRETTOKEN" not in details["d"]


def test_an_operator_adds_a_rule_and_sends_a_test_a_viewer_may_not(
    as_role: Callable[[str], TestClient], conn: psycopg.Connection[Any]
) -> None:
    admin = as_role("admin")
    with receiver() as hook:
        post(
            admin, "/notifications/channels", {"name": "hooks", "kind": "webhook", "url": hook.url}
        )
        channel_id = _channel_id(conn, "hooks")
        operator = as_role("operator")
        refused = post(
            operator, "/notifications/channels", {"name": "x", "kind": "webhook", "url": hook.url}
        )
        assert refused.status_code == 403
        bad = post(
            operator,
            "/notifications/rules",
            {"channel": str(channel_id), "event": "dead_letter", "job": "nope"},
        )
        assert bad.status_code == 422 and "No job is called nope." in bad.text
        rule = post(
            operator, "/notifications/rules", {"channel": str(channel_id), "event": "breaker_open"}
        )
        assert rule.status_code == 303
        page = operator.get("/notifications")
        assert "Tell hooks when a service&#39;s circuit breaker opens" in page.text
        test = post(operator, f"/notifications/channels/{channel_id}/test", {})
        assert test.status_code == 303
        waiting = operator.get(test.headers["location"])
        assert "Waiting to be sent" in waiting.text and 'hx-trigger="every 2s"' in waiting.text
        assert outbox.deliver(conn, KEY).sent == 1
        log = operator.get(f"/notifications/channels/{channel_id}", headers={"HX-Request": "true"})
        assert "Delivered" in log.text and "every 2s" not in log.text
        assert hook.count() == 1
        viewer = as_role("viewer")
        assert viewer.get("/notifications", follow_redirects=False).status_code == 403


def test_the_api_lists_channels_without_secrets_queues_a_test_and_reads_its_outcome(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    with receiver() as hook, api_as(db_url, "operator") as api, api_as(db_url, "viewer") as viewer:
        channel = channels.create(conn, KEY, name="hooks", kind="webhook",
                                  fields={"url": hook.url + "?token=SECRETTOKEN"},
                                  actor="alice")  # fmt: skip
        rules.create(conn, channel_id=channel.id, event="dead_letter", actor="alice")
        listed = api.get("/api/v1/notifications")
        assert listed.status_code == 200 and "SECRETTOKEN" not in listed.text
        (shown,) = listed.json()["channels"]
        assert shown["address"].startswith("Webhook http://127.0.0.1:")
        assert shown["rules"][0]["event"] == "dead_letter"
        assert viewer.get("/api/v1/notifications").status_code == 403
        queued = api.post("/api/v1/notifications/channels/hooks/test")
        assert queued.status_code == 202, queued.text
        message = queued.json()
        assert (message["status"], message["tries"]) == ("pending", 0)
        assert outbox.deliver(conn, KEY).sent == 1
        read = api.get(f"/api/v1/notifications/messages/{message['id']}")
        assert read.json()["status"] == "sent"
        assert hook.posts[0].headers["Idempotency-Key"] == str(message["id"])
        missing = api.post("/api/v1/notifications/channels/nope/test")
        assert missing.status_code == 404
        assert missing.json()["error"] == {"message": "No channel is called nope.", "field": "name"}
