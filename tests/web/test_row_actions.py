"""Row actions that stay on their page answer htmx with the row as it is now and a message
for the page's flash region (an out-of-band swap); a plain form post still goes back to the
list, so the page works without JavaScript."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from app.people import tokens
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
