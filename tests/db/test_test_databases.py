"""The test databases themselves: a template whose migration fails is dropped at once."""

from __future__ import annotations

import os

import psycopg
import pytest

from app.core import migrate
from tests.helpers.databases import migrated_database


def database_exists(server_url: str, name: str) -> bool:
    with psycopg.connect(server_url, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        return row is not None


def test_a_failed_template_migration_drops_the_database(
    server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"sundial_failed_tpl_{os.getpid()}"

    def half_then_fail(url: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE half_done (id int)")
        raise RuntimeError("migration failed halfway")

    monkeypatch.setattr(migrate, "upgrade", half_then_fail)
    with pytest.raises(RuntimeError, match="halfway"), migrated_database(server_url, name):
        pass
    assert not database_exists(server_url, name)
