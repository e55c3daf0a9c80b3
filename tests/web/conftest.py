"""A TestClient of the real application against this test's database, and signed-in
people of each role."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from starlette.testclient import TestClient

from app.core.config import Settings
from app.web import create_app
from tests.helpers.people import make_user, sign_in


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
