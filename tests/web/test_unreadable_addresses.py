"""A NUL character (%00 in an address, \u0000 in a form or JSON) cannot reach the
database as text: every page and API answer says so with a 400 in words, never a server
error."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from starlette.testclient import TestClient

from tests.helpers.api_client import make_token
from tests.helpers.people import csrf_of

PAGES = [
    "/jobs?q=%00",
    "/jobs/names?q=a%00",
    "/jobs/bad%00name",
    "/schedules?name=%00",
    "/schedules?target=x%00y",
    "/schedules/bad%00name",
    "/runs?error=%00",
    "/runs?job=%00",
    "/runs?schedule=%00",
]
ALREADY_REFUSED = ["/workflows/bad%00name", "/calendars/bad%00name"]  # no such name: 404


@pytest.mark.parametrize("path", PAGES)
def test_a_nul_in_a_page_address_is_a_400_in_words(
    as_role: Callable[[str], TestClient], path: str
) -> None:
    client = as_role("viewer")
    client.raise_server_exceptions = False
    response = client.get(path)
    assert response.status_code == 400, (path, response.status_code)
    assert "NUL character" in response.text


@pytest.mark.parametrize("path", ALREADY_REFUSED)
def test_pages_that_look_names_up_first_say_there_is_no_such_name(
    as_role: Callable[[str], TestClient], path: str
) -> None:
    client = as_role("viewer")
    client.raise_server_exceptions = False
    assert client.get(path).status_code == 404


def test_a_nul_in_an_api_address_is_a_json_400(client: TestClient, db_url: str) -> None:
    client.raise_server_exceptions = False
    headers = {"Authorization": f"Bearer {make_token(db_url, 'viewer', 'read')}"}
    for path in ("/api/v1/schedules/bad%00name", "/api/v1/jobs/a%00"):
        response = client.get(path, headers=headers)
        assert response.status_code == 400, (path, response.status_code)
        assert "NUL character" in response.json()["error"]["message"]
    refused = client.get("/api/v1/runs?job=%00", headers=headers)  # checked field by field
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "job"


def test_a_nul_in_a_form_is_a_400_in_words(client: TestClient) -> None:
    client.raise_server_exceptions = False
    token = csrf_of(client, "/login")
    form = {"username": "a\x00b", "password": "secret", "csrf_token": token}
    response = client.post("/login", data=form, follow_redirects=False)
    assert response.status_code == 400
    assert "NUL character" in response.text
