"""The worker, trigger and reaper started before their database answers (nothing listens
yet, or every connection slot is taken) wait, with a log line per try, and start working
once it answers, instead of exiting. Real processes, real PostgreSQL behind a forwarder
that the test starts late."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.helpers.commands import free_port
from tests.helpers.processes import Service, query, services
from tests.helpers.waits import wait_until

WAITING = "waits for the database"


@contextmanager
def forwarder(port: int, to_host: str, to_port: int) -> Iterator[None]:
    """Listen on 127.0.0.1:`port` and pipe every connection to `to_host`:`to_port`."""
    server = socket.create_server(("127.0.0.1", port))
    stopping = threading.Event()
    sockets: list[socket.socket] = [server]

    def pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, target):
                end.close()

    def accept() -> None:
        while not stopping.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection((to_host, to_port))
            sockets.extend((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield
    finally:
        stopping.set()
        for sock in sockets:
            sock.close()


def url_with(db_url: str, user: str | None = None, port: int | None = None, db: str = "") -> str:
    """`db_url` with another user, port or database name."""
    parts = urlsplit(db_url)
    netloc = f"{user or parts.username}@{parts.hostname}:{port or parts.port or 5432}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{db}" if db else parts.path))


def waited(service: Service, tries: int) -> bool:
    return service.log().count(WAITING) >= tries


def is_working(db_url: str, command: str) -> bool:
    """The service did its first step in the database."""
    if command == "trigger":
        return bool(query(db_url, "SELECT 1 FROM leader_leases WHERE name = 'trigger'"))
    if command == "worker":
        return bool(query(db_url, "SELECT 1 FROM workers WHERE stopped_at IS NULL"))
    return bool(
        query(
            db_url,
            "SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'sundial reaper %%'",
        )
    )


@pytest.mark.parametrize("command", ["trigger", "reaper", "worker"])
def test_a_service_waits_for_a_database_that_is_not_listening_yet(
    db_url: str, tmp_path: Path, command: str
) -> None:
    port = free_port()
    target = urlsplit(db_url)
    with services(url_with(db_url, port=port), tmp_path) as start:
        service = start(command)
        wait_until(lambda: waited(service, 3), "three tries logged", 60, service)
        assert service.proc.poll() is None  # still there, not exited
        assert "database unavailable" in service.log()
        with forwarder(port, target.hostname or "127.0.0.1", target.port or 5432):
            service.wait_for_log(f"{command} started")
            wait_until(lambda: is_working(db_url, command), f"the {command} at work", 60, service)
            assert service.stop() == 0


def test_the_trigger_waits_while_the_database_has_no_connection_slot_for_it(
    db_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    role = f"full_{conn.info.backend_pid}"
    conn.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
    try:
        conn.execute(f"GRANT pg_read_all_data, pg_write_all_data TO {role}")
        limited = url_with(db_url, user=role)
        with services(limited, tmp_path) as start:
            trigger = start("trigger")
            wait_until(lambda: waited(trigger, 2), "two tries logged", 60, trigger)
            assert "too many connections to the database" in trigger.log()
            conn.execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
            trigger.wait_for_log("trigger started")
            wait_until(lambda: is_working(db_url, "trigger"), "the trigger's lease", 60, trigger)
            assert trigger.stop() == 0
    finally:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
        )
        conn.execute(f"DROP ROLE {role}")


def test_a_database_that_does_not_exist_is_one_sentence_at_once(
    db_url: str, tmp_path: Path
) -> None:
    missing = url_with(db_url, db="no_such_database_here")
    with services(missing, tmp_path) as start:
        reaper = start("reaper")
        assert reaper.proc.wait(60) == 3  # EXIT_UNAVAILABLE
    assert WAITING not in reaper.log()
    assert 'database "no_such_database_here" does not exist' in reaper.log()
