"""`Reconnecting` names what went wrong with the database and backs off until a statement
succeeds, against errors raised by a real PostgreSQL."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest

from app.core.db import DatabaseUnavailable, connect
from app.services.reconnecting import Reconnecting, describe_db_error

Conn = psycopg.Connection[Any]


def raise_sqlstate(conn: Conn, condition: str) -> None:
    """Have the server raise the error named `condition` (as a full disk would)."""
    conn.execute(
        f"DO $$ BEGIN RAISE EXCEPTION 'simulated {condition}' USING ERRCODE = '{condition}'; END $$"
    )


def server_error(db_url: str, condition: str) -> psycopg.Error:
    with psycopg.connect(db_url, autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as caught:
            raise_sqlstate(conn, condition)
    return caught.value


@pytest.mark.parametrize(
    ("condition", "described"),
    [
        ("disk_full", "database disk full (SQLSTATE 53100)"),
        ("out_of_memory", "database out of memory (SQLSTATE 53200)"),
        ("too_many_connections", "too many connections to the database (SQLSTATE 53300)"),
        ("insufficient_resources", "database short of resources (SQLSTATE 53000)"),
    ],
)
def test_insufficient_resources_are_named(db_url: str, condition: str, described: str) -> None:
    assert describe_db_error(server_error(db_url, condition)) == described


def test_a_role_over_its_connection_limit_is_named_at_connect(db_url: str, conn: Conn) -> None:
    role = f"limited_{conn.info.backend_pid}"
    conn.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
    try:
        with pytest.raises(DatabaseUnavailable) as caught:
            connect(psycopg.conninfo.make_conninfo(db_url, user=role))
    finally:
        conn.execute(f"DROP ROLE {role}")
    assert describe_db_error(caught.value).startswith("too many connections to the database")


def test_a_refused_connection_is_database_unavailable(db_url: str) -> None:
    with pytest.raises(DatabaseUnavailable) as caught:
        connect(psycopg.conninfo.make_conninfo(db_url, host="127.0.0.1", port=1))
    assert describe_db_error(caught.value) == "database unavailable"


def test_backoff_keeps_growing_while_statements_fail_on_a_reachable_server(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    delays: list[float] = []
    reconnecting = Reconnecting(db_url, "test finish", lambda: False, wait=delays.append)
    failures_seen: list[int] = []

    def disk_full_three_times(conn: Conn) -> str:
        failures_seen.append(reconnecting._backoff.failures)
        if len(failures_seen) <= 3:
            raise_sqlstate(conn, "disk_full")
        return "written"

    with caplog.at_level(logging.WARNING):
        assert reconnecting.call(disk_full_three_times) == "written"
    reconnecting.close()
    # Each reconnect succeeded, yet the backoff grew: it resets only once a statement works.
    assert failures_seen == [0, 1, 2, 3]
    assert reconnecting._backoff.failures == 0
    assert len(delays) == 3
    # Warnings thin out during an outage; each one names the full disk, none says unavailable.
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings
    assert all("test finish: database disk full (SQLSTATE 53100)" in w for w in warnings)
