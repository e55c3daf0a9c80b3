"""Backfills on the schedule page: preview a past range (count, first and last in the
schedule's zone, DST nights, fires left alone, the overlap policy), start it, see its
progress, cancel it with a confirmation; bad input is a sentence and starts nothing;
viewers see progress only; every change audited."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import create_schedule
from app.services.trigger import Trigger
from tests.helpers.schedules import settings
from tests.helpers.web import post

Conn = psycopg.Connection[Any]
RANGE = {"start": "2026-03-27T00:00", "end": "2026-03-30T23:00", "concurrency": "2"}


def nightly(conn: Conn, overlap: OverlapPolicy = OverlapPolicy.SKIP) -> None:
    spec = ScheduleSpec(name="nightly", cron="30 2 * * *", timezone="Europe/Berlin",
                        handler="noop", overlap=overlap)  # fmt: skip
    create_schedule(conn, spec)


def test_an_operator_previews_starts_follows_and_cancels_a_backfill(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    nightly(conn)
    client = as_role("operator")
    page = client.get("/schedules/nightly").text
    assert "Run past times (backfill)" in page and 'id="backfill-list"' in page
    shown = post(client, "/schedules/nightly/backfills/preview", RANGE,
                 **{"HX-Request": "true"})  # fmt: skip
    text = html.unescape(shown.text)
    assert shown.status_code == 200
    assert "4 runs" in text and "the first for 2026-03-27 02:30 CET" in text
    assert "02:30 does not exist on 29 Mar (the clocks jump forward); runs at 03:00" in text
    assert "one at a time (not 2)" in text
    assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone() == {"n": 0}
    whole_page = post(client, "/schedules/nightly/backfills/preview", RANGE)  # without script
    assert whole_page.status_code == 200 and "Start backfill of 4 runs" in whole_page.text
    assert "Schedule nightly" in whole_page.text
    started = post(client, "/schedules/nightly/backfills", RANGE)
    assert started.status_code == 303
    assert started.headers["location"] == "/schedules/nightly?done=backfill-started#backfills"
    Trigger(settings()).run_once(conn)
    progress = html.unescape(client.get("/schedules/nightly/backfills").text)
    assert "0 done · 0 running · 4 waiting · 0 failed" in progress
    fires = client.get("/schedules/nightly/fires").text
    assert fires.count('<span class="badge">backfill</span>') == 1  # one at a time
    assert "Cancel backfill" in progress
    (backfill,) = conn.execute("SELECT id FROM backfills").fetchall()
    cancel_url = f"/schedules/nightly/backfills/{backfill['id']}/cancel"
    refused = post(client, cancel_url, {})
    assert refused.status_code == 422 and "Tick the box" in refused.text
    cancelled = post(client, cancel_url, {"confirm": "yes"})
    assert cancelled.status_code == 303
    progress = html.unescape(client.get("/schedules/nightly/backfills").text)
    assert "cancelled" in progress and "1 cancelled · 3 not run" in progress
    actions = conn.execute(
        "SELECT actor, action FROM audit_log WHERE action LIKE 'schedule.backfill%' ORDER BY id"
    ).fetchall()
    assert [a["action"] for a in actions] == ["schedule.backfill", "schedule.backfill_cancel"]
    assert {a["actor"] for a in actions} == {"operator"}


def test_bad_ranges_are_a_sentence_next_to_the_field_and_start_nothing(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    nightly(conn)
    client = as_role("operator")
    backwards = {**RANGE, "start": "2026-04-01T00:00"}
    page = post(client, "/schedules/nightly/backfills", backwards)
    assert page.status_code == 422
    assert 'id="end-error"' in page.text and "before its start" in page.text
    future = post(client, "/schedules/nightly/backfills/preview",
                  {**RANGE, "end": "2099-01-01T00:00"}, **{"HX-Request": "true"})  # fmt: skip
    assert "in the future" in future.text and "Nothing was started" in future.text
    missing = post(client, "/schedules/nightly/backfills", {**RANGE, "start": ""})
    assert missing.status_code == 422 and "Fill in the start" in missing.text
    assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone() == {"n": 0}


def test_a_viewer_sees_progress_but_cannot_start_one(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    nightly(conn)
    client = as_role("viewer")
    page = client.get("/schedules/nightly").text
    assert 'id="backfill-list"' in page and "Show what it will run" not in page
    assert post(client, "/schedules/nightly/backfills", RANGE).status_code == 403
