"""With its database gone, a page answers at once with a readable 503, and /healthz says
"unavailable" without the driver's message."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from starlette.testclient import TestClient

from app.core import migrate
from app.core.config import Settings
from app.web import create_app
from tests.helpers.databases import with_database
from tests.helpers.people import make_user, sign_in


@pytest.fixture
def doomed_db(server_url: str, template_db: str) -> Iterator[str]:
    name = f"sundial_doomed_web_{os.getpid()}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield name
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_pages_answer_503_and_healthz_hides_the_driver_error_when_the_database_is_gone(
    server_url: str, doomed_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = with_database(server_url, doomed_db)
    assert migrate.current_revision(url) == migrate.head_revision()
    make_user(url, "alice", "viewer")
    settings = Settings.from_env({"SECRET_KEY": "test-secret-key"})
    with TestClient(create_app(settings, url)) as client:
        sign_in(client, "alice")
        assert client.get("/").status_code == 200
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{doomed_db}" WITH (FORCE)')

        page = client.get("/")
        assert page.status_code == 503
        assert "The database is not answering" in page.text

        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json() == {"status": "error", "database": "unavailable"}
    assert any("health check failed" in r.getMessage() for r in caplog.records)
