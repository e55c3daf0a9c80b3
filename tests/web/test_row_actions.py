"""Row actions that stay on their page answer htmx with the row as it is now (or nothing,
for a row that goes) and a message for the page's flash region (an out-of-band swap); a
plain form post still goes back to the page, so it works without JavaScript."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from app.people import tokens
from app.scheduling import calendars
from app.scheduling.calendars import CalendarSpec, WindowSpec
from tests.helpers.people import make_user
from tests.helpers.web import post


def test_revoking_a_token_answers_with_its_row_and_a_message(
    as_role: Callable[[str], TestClient], conn: Any, db_url: str
) -> None:
    make_user(db_url, "billing-bot", "operator")
    made = tokens.create(conn, "billing-bot", "write", name="billing service", actor="test")
    client = as_role("admin")
    path = f"/tokens/{made.id}/revoke"

    answer = post(client, path, {}, **{"HX-Request": "true"})
    assert answer.status_code == 200
    row, _, flash = answer.text.partition("</tr>")
    assert f'<tr id="token-{made.id}">' in row and ">revoked<" in row
    assert "Revoke token" not in row  # nothing left to revoke
    assert 'id="flash-region"' in flash and 'hx-swap-oob="true"' in flash
    assert "Token revoked" in flash and 'role="status"' in flash

    again = post(client, path, {}, **{"HX-Request": "true"})
    assert again.status_code == 200 and "Not revoked: API token" in again.text
    assert "already revoked" in again.text

    plain = post(client, path, {})
    assert plain.status_code == 303 and plain.headers["location"].endswith("/tokens")
    actions = conn.execute("SELECT action FROM audit_log ORDER BY id").fetchall()
    assert [a["action"] for a in actions].count("token.revoke") == 1


def test_removing_a_blackout_window_removes_its_row_and_says_so(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    calendars.create(conn, CalendarSpec(name="Holidays", country="FR"), actor="alice")
    window = WindowSpec("quarter close", "2026-12-30T18:00", "2027-01-02T09:00", "Europe/Paris")
    first = calendars.add_window(conn, "Holidays", window, actor="alice")
    second = calendars.add_window(conn, "Holidays", window, actor="alice")
    client = as_role("editor")

    answer = post(client, f"/calendars/Holidays/windows/{first}/delete", {},
                  **{"HX-Request": "true"})  # fmt: skip
    assert answer.status_code == 200
    assert "<tr" not in answer.text  # the row is swapped for nothing
    assert 'hx-swap-oob="true"' in answer.text and "Blackout window removed" in answer.text
    assert 'id="calendar-summary"' in answer.text and "1 blackout window." in answer.text
    assert f'id="window-{second}"' in client.get("/calendars/Holidays").text
    assert f'id="window-{first}"' not in client.get("/calendars/Holidays").text

    plain = post(client, f"/calendars/Holidays/windows/{second}/delete", {})
    assert plain.status_code == 303 and plain.headers["location"].endswith("#windows")
    assert conn.execute("SELECT count(*) AS n FROM blackout_windows").fetchone()["n"] == 0
