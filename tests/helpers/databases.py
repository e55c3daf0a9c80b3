"""Test databases: a database's URL on the same server, and a migrated one for a while."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg

from app.core import migrate
from app.core.db import Conn


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` on the same server."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextmanager
def migrated_database(server_url: str, name: str) -> Iterator[None]:
    """Database `name`, created afresh and migrated, dropped afterwards; dropped at once
    when the migration fails, so a failed run leaves no half-migrated template behind."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate.upgrade(with_database(server_url, name))
        yield
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def count(conn: Conn, table: str) -> int:
    """How many rows `table` holds."""
    return int(conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"])
