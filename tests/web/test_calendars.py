"""Exclusion calendars, the load forecast and the week calendar through the real app:
roles, CSRF, 422 for bad input with nothing written, and what the pages show."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
from starlette.testclient import TestClient

from app.scheduling import calendars, schedules
from app.scheduling.calendars import CalendarSpec
from app.scheduling.schedule_spec import ScheduleSpec
from tests.helpers.databases import count
from tests.helpers.people import csrf_of

Conn = psycopg.Connection[dict[str, Any]]


def post(client: TestClient, path: str, data: dict[str, str], page: str = "/calendars") -> Any:
    token = csrf_of(client, page)
    return client.post(path, data={**data, "csrf_token": token}, follow_redirects=False)


def test_a_viewer_sees_every_page_but_cannot_change_a_calendar(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    calendars.create(conn, CalendarSpec(name="Germany", country="DE"), actor="alice")
    client = as_role("viewer")
    for path in ("/calendars", "/calendars/Germany", "/calendar", "/forecast"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert "New calendar" not in page.text and "Delete calendar" not in page.text
    assert "Christmas Day" in client.get("/calendars/Germany").text
    refused = post(client, "/calendars", {"name": "mine"})
    assert refused.status_code == 403
    window = {"window_name": "x", "starts_at": "2026-12-01T00:00", "ends_at": "2026-12-02T00:00",
              "timezone": "UTC"}  # fmt: skip
    assert post(client, "/calendars/Germany/windows", window).status_code == 403
    assert post(client, "/calendars/Germany/delete", {}).status_code == 403
    assert count(conn, "exclusion_calendars") == 1 and count(conn, "blackout_windows") == 0


def test_an_editor_creates_a_calendar_and_bad_input_is_refused_next_to_its_field(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    assert client.post("/calendars", data={"name": "no token"}).status_code == 403
    unknown = post(client, "/calendars", {"name": "Atlantis", "country": "XX"})
    assert unknown.status_code == 422
    assert 'id="country-error"' in unknown.text and "not a country" in unknown.text
    assert count(conn, "exclusion_calendars") == 0
    created = post(client, "/calendars", {"name": "Bavaria", "country": "de", "subdivision": "by"})
    assert created.status_code == 303 and created.headers["location"] == "/calendars/Bavaria"
    backwards = {"window_name": "quarter close", "starts_at": "2026-12-30T18:00",
                 "ends_at": "2026-12-30T09:00", "timezone": "Europe/Berlin"}  # fmt: skip
    refused = post(client, "/calendars/Bavaria/windows", backwards)
    assert refused.status_code == 422 and 'id="ends_at-error"' in refused.text
    assert "must come after its start" in refused.text
    bad_zone = post(client, "/calendars/Bavaria/windows", {**backwards, "timezone": "Mars/Base"})
    assert bad_zone.status_code == 422 and 'id="timezone-error"' in bad_zone.text
    assert count(conn, "blackout_windows") == 0
    window = {**backwards, "ends_at": "2027-01-02T09:00"}
    assert post(client, "/calendars/Bavaria/windows", window).status_code == 303
    shown = client.get("/calendars/Bavaria").text
    assert "quarter close" in shown and "2026-12-30 18:00 CET" in shown
    actions = [r["action"] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]
    assert actions[-2:] == ["calendar.create", "calendar.window.add"]


def test_an_editor_applies_a_calendar_to_a_schedule_and_deletes_it(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="nightly", cron="0 2 * * *", handler="noop"))
    calendars.create(conn, CalendarSpec(name="Holidays <b>", country="FR"), actor="alice")
    client = as_role("editor")
    path = "/calendars/Holidays%20%3Cb%3E"
    page = client.get(path).text
    assert "Holidays &lt;b&gt;" in page and "Holidays <b>" not in page
    missing = post(client, path + "/schedules", {"schedule": "nope", "use": "yes"}, path)
    assert missing.status_code == 422 and "no schedule named" in missing.text
    assert (
        post(client, path + "/schedules", {"schedule": "nightly", "use": "yes"}, path).status_code
        == 303
    )
    assert calendars.get(conn, "Holidays <b>")["schedules"] == ["nightly"]
    assert post(client, path + "/delete", {}, path).status_code == 303
    row = conn.execute("SELECT calendar_id FROM schedules WHERE name = 'nightly'").fetchone()
    assert row is not None and row["calendar_id"] is None
    # the schedule's own history says it lost the calendar, and when
    changes = conn.execute(
        "SELECT actor, details FROM audit_log WHERE target_type = 'schedule' "
        "AND action = 'schedule.calendar' ORDER BY id"
    ).fetchall()
    assert [(c["actor"], c["details"]["after"]) for c in changes] == [
        ("editor", {"calendar": "Holidays <b>"}),
        ("editor", {"calendar": None}),
    ]
    history = client.get("/schedules/nightly/history").text
    newest = history[history.find("Version 3 (current)") : history.find("Version 2")]
    assert "calendar by editor" in newest and "Holidays &lt;b&gt;" in newest
    assert "(removed)" in newest


def test_the_forecast_fragment_draws_the_edited_schedule_apart(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="hourly", cron="0 * * * *", handler="noop"))
    client = as_role("viewer")
    page = client.get("/forecast?zone=UTC").text
    assert "1 active schedule will fire 24 times" in page
    fragment = client.get(
        "/forecast/fragment", params={"cron": "0 * * * *", "timezone": "Europe/Berlin"},
        headers={"HX-Request": "true"},
    )  # fmt: skip
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert "This schedule fires 24 times" in fragment.text
    assert fragment.text.count('class="l4 mine"') == 24
    assert "with 1 other fire" in fragment.text
    # editing "hourly" itself: its own fires are not counted as others'
    itself = client.get("/forecast/fragment", params={"cron": "0 * * * *", "name": "hourly"})
    assert "Other schedules fire 0 times" in itself.text
    bad = client.get("/forecast/fragment", params={"cron": "61 * * * *"})
    assert bad.status_code == 422 and "cannot show this schedule" in bad.text
    never = client.get("/forecast/fragment", params={"every_seconds": "soon"})
    assert never.status_code == 422 and "whole number" in never.text


def test_the_week_shows_frequent_schedules_as_bands_and_filters_by_name(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="pulse", cron="*/5 * * * *", handler="noop"))
    schedules.create_schedule(conn, ScheduleSpec(name="report", cron="0 9 * * *", handler="noop"))
    client = as_role("viewer")
    # next week and the next Christmas ahead: every fire of the week shown is still to come
    today = datetime.now(UTC).date()
    monday = today + timedelta(days=7 - today.weekday())
    next_week = (monday + timedelta(days=2)).isoformat()
    week = client.get("/calendar", params={"week": next_week, "zone": "UTC"}).text
    assert f"Week of {monday.day} {monday:%b %Y}" in week
    assert week.count('class="band"') == 7 and "Every 5 minutes · 288 fires" in week
    assert week.count('<span class="what">report</span>') == 7
    filtered = client.get("/calendar", params={"week": next_week, "q": "REP"}).text
    assert "pulse" not in filtered and "report" in filtered
    calendars.create(conn, CalendarSpec(name="France", country="FR"), actor="alice")
    calendars.assign(conn, "report", "France", actor="alice")
    christmas_day = date(today.year if today < date(today.year, 12, 18) else today.year + 1, 12, 25)
    christmas = client.get(
        "/calendar", params={"week": christmas_day.isoformat(), "zone": "UTC"}
    ).text
    assert christmas.count('class="excluded"') == 1
    assert "excluded: public holiday in FR: Christmas Day" in christmas
    none = client.get("/calendar", params={"q": "zzz"}, headers={"HX-Request": "true"})
    assert "No active schedule matches" in none.text and "<html" not in none.text
