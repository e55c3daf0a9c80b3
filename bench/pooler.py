"""A transaction-mode PgBouncer for benchmarks: the pooler a real fleet sits behind.

    with transaction_pooler(url, pool_size=20) as pooled_url: ...

Needs the `pgbouncer` binary (Debian: `apt-get install pgbouncer`); as root it runs as
`nobody`, who must read its configuration, so the folder is world-readable.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

PGBOUNCER = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")
MAX_CLIENTS = 5000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def transaction_pooler(url: str, pool_size: int) -> Iterator[str]:
    """A PgBouncer in transaction mode in front of `url`'s server with `pool_size` server
    connections per database; yields `url` reached through it."""
    if PGBOUNCER is None:
        raise SystemExit("pgbouncer is not installed (apt-get install pgbouncer), or use --direct")
    parts = urlsplit(url)
    user = parts.username or "postgres"
    folder = Path(tempfile.mkdtemp(prefix="sundial-bench-pooler-"))
    folder.chmod(0o755)
    port = _free_port()
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    config = folder / "pgbouncer.ini"
    config.write_text(
        f"""[databases]
* = host={parts.hostname or "127.0.0.1"} port={parts.port or 5432} user={user}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "users.txt"}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = {MAX_CLIENTS}
ignore_startup_parameters = extra_float_digits,options
"""
    )
    as_nobody = ["-u", "nobody"] if os.geteuid() == 0 else []
    log = (folder / "pgbouncer.log").open("w")
    proc = subprocess.Popen([PGBOUNCER, *as_nobody, str(config)], stdout=log, stderr=log)
    pooled = urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{port}", query=""))
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with psycopg.connect(pooled, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    said = (folder / "pgbouncer.log").read_text()[-2000:]
                    raise SystemExit(f"pgbouncer did not start:\n{said}") from None
                time.sleep(0.1)
        yield pooled
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
