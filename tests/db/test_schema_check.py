"""The quick schema check of every service start: it confirms a migrated database and
leaves every other case to Alembic's check, which says what is wrong."""

from __future__ import annotations

import psycopg

from app.core.schema_check import schema_is_current


def test_a_migrated_database_is_current(db_url: str) -> None:
    assert schema_is_current(db_url)


def test_an_empty_or_older_database_is_left_to_the_full_check(
    empty_db_url: str, db_url: str
) -> None:
    assert not schema_is_current(empty_db_url)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    assert not schema_is_current(db_url)
