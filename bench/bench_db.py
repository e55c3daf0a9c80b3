"""A scratch database for a benchmark: created, migrated, dropped afterwards.

Uses BENCH_DATABASE_URL, then DATABASE_URL, then a local PostgreSQL on 127.0.0.1:5432,
then the embedded PostgreSQL, as the server on which to create it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from app.core import migrate
from app.core.db import normalize_url

LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
REPO = Path(__file__).resolve().parent.parent


def server_url() -> str:
    configured = os.environ.get("BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if configured:
        return normalize_url(configured)
    try:
        with psycopg.connect(LOCAL_SERVER, connect_timeout=2):
            return LOCAL_SERVER
    except psycopg.OperationalError:
        import pgserver

        server = pgserver.get_server(REPO / ".sundial" / "bench-pg", cleanup_mode="stop")
        return str(server.get_uri())


def new_database(prefix: str) -> str:
    """A new database named `prefix_<random>`, migrated; its URL. The caller drops it."""
    admin = server_url()
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(admin)._replace(path=f"/{name}"))
    try:
        migrate.upgrade(url)
    except BaseException:
        drop_database(url)
        raise
    return url


def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    url = new_database(prefix)
    try:
        yield url
    finally:
        drop_database(url)
