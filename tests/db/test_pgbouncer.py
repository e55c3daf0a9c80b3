"""Sundial behind a real PgBouncer in transaction mode (Heroku's connection pooling):
migrations, bulk submits, workers and the trigger all go through the pooler, which hands
each transaction to any of a few server connections."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from app.client import NewRun, Sundial
from app.core import migrate
from tests.helpers.commands import REPO, free_port, run_sundial, sundial_cmd, sundial_env
from tests.helpers.processes import query, services, status_counts, wait_until

PGBOUNCER = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")
# Fewer server connections than clients, handed out in turn (server_round_robin), so the
# transactions of one client really land on different server connections.
SERVER_POOL_SIZE = 3
POOLED = {"SUNDIAL_DATABASE_POOLER": "transaction"}

pytestmark = pytest.mark.skipif(
    PGBOUNCER is None, reason="the pgbouncer binary is not installed (apt-get install pgbouncer)"
)


def pgbouncer_config(server_url: str, port: int, folder: Path) -> Path:
    """A transaction-mode PgBouncer on 127.0.0.1:`port` in front of the test server."""
    server = conninfo_to_dict(server_url)
    user = str(server.get("user") or "postgres")
    target = f"host={server.get('host') or '127.0.0.1'} port={server.get('port') or 5432}"
    if server.get("password"):
        target += f" password={server['password']}"
    (folder / "userlist.txt").write_text(f'"{user}" ""\n')
    config = folder / "pgbouncer.ini"
    config.write_text(
        f"""[databases]
* = {target} user={user}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "userlist.txt"}
pool_mode = transaction
server_round_robin = 1
default_pool_size = {SERVER_POOL_SIZE}
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,options
"""
    )
    return config


@pytest.fixture
def pgbouncer(server_url: str) -> Iterator[int]:
    """A real PgBouncer process in transaction mode; yields its port."""
    assert PGBOUNCER is not None
    port = free_port()
    # PgBouncer refuses to run as root: it then drops to `nobody`, who must read the config.
    folder = Path(tempfile.mkdtemp(prefix="sundial-pgbouncer-"))
    folder.chmod(0o755)
    config = pgbouncer_config(server_url, port, folder)
    as_nobody = ["-u", "nobody"] if os.geteuid() == 0 else []
    log_path = folder / "pgbouncer.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [PGBOUNCER, *as_nobody, str(config)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_until(lambda: _accepts(port, server_url, proc), "pgbouncer accepting connections")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def _accepts(port: int, server_url: str, proc: subprocess.Popen[Any]) -> bool:
    assert proc.poll() is None, "pgbouncer exited at start"
    try:
        with psycopg.connect(through(server_url, port), connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


def through(url: str, port: int) -> str:
    """`url` (same database and user) reached through the pooler on `port`."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else "postgres@"
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}", query=""))


@pytest.fixture
def pooled_client_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's own connections (the client, migrations) behave as a pooled app's."""
    for name, value in POOLED.items():
        monkeypatch.setenv(name, value)


def test_concurrent_migrations_through_the_pooler_leave_no_lock_behind(
    empty_db_url: str, pgbouncer: int
) -> None:
    pooled = through(empty_db_url, pgbouncer)
    migrations = [
        subprocess.Popen(
            sundial_cmd("migrate"),
            env=sundial_env(pooled, **POOLED),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(2)
    ]
    for migration in migrations:
        stdout, stderr = migration.communicate(timeout=120)
        assert migration.returncode == 0, stderr
        assert f"revision {migrate.head_revision()}" in stdout
    assert migrate.current_revision(empty_db_url) == migrate.head_revision()
    held = query(
        empty_db_url,
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    assert held == [{"n": 0}]


def test_workers_trigger_and_bulk_submit_through_the_pooler(
    db_url: str, pgbouncer: int, tmp_path: Path, pooled_client_env: None
) -> None:
    pooled = through(db_url, pgbouncer)
    added = run_sundial(
        pooled,
        "schedule",
        "add",
        "tick",
        "--every",
        "1",
        "--handler",
        "noop",
        "--exact-minute",
        **POOLED,
    )
    assert added.returncode == 0, added.stderr
    with services(pooled, tmp_path) as start:
        # One worker polls only; the other LISTENs on a direct connection.
        polling = start("worker", "--concurrency", "4", **POOLED)
        listening = start(
            "worker", "--concurrency", "4", SUNDIAL_DIRECT_DATABASE_URL=db_url, **POOLED
        )
        trigger = start("trigger", **POOLED)
        for service in (polling, listening, trigger):
            service.wait_for_log("started")
        with Sundial(pooled) as client:
            singles = [client.submit("noop", {"n": n}) for n in range(30)]
            keyed = client.submit_many([NewRun("noop", idempotency_key=f"k{n}") for n in range(50)])
            # Above COPY_THRESHOLD: the COPY staging table, twice on pooled connections.
            bulk = client.submit_many([NewRun("noop") for _ in range(1200)])
            bulk += client.submit_many([NewRun("noop") for _ in range(1100)])
        submitted = len(singles) + len(keyed) + len(bulk)
        assert len(set(singles + keyed + bulk)) == submitted
        wait_until(
            lambda: _completed(db_url) >= submitted + 2,
            "every submitted run and two scheduled ones completed",
            timeout=120,
            service=polling,
        )
        listeners = query(
            db_url,
            "SELECT count(*) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() "
            "AND application_name LIKE 'sundial worker listener %%'",
        )
        logs = [service.log() for service in (polling, listening, trigger)]
    assert set(status_counts(db_url)) <= {"completed", "pending"}, status_counts(db_url)
    assert listeners == [{"n": 1}]  # only the worker with a direct URL
    for log in logs:
        assert "prepared statement" not in log, log
        assert "Traceback" not in log, log


def _completed(db_url: str) -> int:
    return status_counts(db_url).get("completed", 0)


def test_a_bad_pooler_setting_is_refused_in_one_sentence(db_url: str) -> None:
    result = run_sundial(db_url, "worker", SUNDIAL_DATABASE_POOLER="session-ish")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "sundial worker: error: SUNDIAL_DATABASE_POOLER must be one of none, transaction, "
        "got 'session-ish'"
    ]
