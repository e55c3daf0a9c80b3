"""A TestClient of the real application against this test's database, and signed-in
people of each role."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.core.config import Settings
from app.people import users
from app.web import create_app

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


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    settings = Settings.from_env({"DATABASE_URL": db_url, "SECRET_KEY": "test-secret-key"})
    with TestClient(create_app(settings, db_url)) as c:
        yield c


@pytest.fixture
def as_role(client: TestClient, db_url: str) -> Callable[[str], TestClient]:
    """`as_role("editor")`: the client, signed in as a new user with that role."""

    def sign_in_as(role: str) -> TestClient:
        make_user(db_url, role, role)
        sign_in(client, role)
        return client

    return sign_in_as
