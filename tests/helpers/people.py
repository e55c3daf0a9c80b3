"""People for the pages' tests: a user of a role, signing in through the form, and the CSRF
token a form carries.
"""

from __future__ import annotations

import re

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.people import users

PASSWORD = "correct horse battery"


_TOKEN = re.compile(r'name="csrf_token" value="([0-9a-f]+)"')


def make_user(db_url: str, name: str, role: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        users.create_user(conn, name, PASSWORD, role, actor="test")


def csrf_of(client: TestClient, path: str = "/login") -> str:
    """The CSRF token the page at `path` embeds."""
    match = _TOKEN.search(client.get(path).text)
    assert match, f"no CSRF token on {path}"
    return match[1]


def sign_in(client: TestClient, name: str) -> None:
    response = client.post(
        "/login",
        data={"username": name, "password": PASSWORD, "csrf_token": csrf_of(client)},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
