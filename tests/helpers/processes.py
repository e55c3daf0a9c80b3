"""Real `sundial` service processes for tests: start, signal, kill, read their logs; and
the reads (and the one in-process finish) that tests make around them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.core import limits
from app.handlers.jobs import Outcome
from app.runs import transitions
from tests.helpers import zygote
from tests.helpers.commands import REPO, sundial_cmd, sundial_env
from tests.helpers.waits import wait_until

FAST_SERVICE_ENV = {
    "SUNDIAL_LEASE_SECONDS": "1.5",
    "SUNDIAL_POLL_SECONDS": "0.2",
    "SUNDIAL_REAPER_INTERVAL_SECONDS": "0.3",
    "SUNDIAL_SHUTDOWN_GRACE_SECONDS": "2",
    "SUNDIAL_HANDLERS": "tests.helpers.worker_handlers",
}


class Service:
    """One `sundial <command>` child process with its output in a log file."""

    def __init__(self, db_url: str, log_dir: Path, command: str, *args: str, **env: str) -> None:
        self.name = f"{command}-{len(list(log_dir.glob(command + '-*.log')))}"
        self.log_path = log_dir / f"{self.name}.log"
        environment = sundial_env(db_url, **{**FAST_SERVICE_ENV, **env})
        self.proc: subprocess.Popen[bytes] | zygote.ForkedProcess
        with self.log_path.open("w") as log:
            if zygote.enabled():  # forked from a process with Sundial imported
                self.proc = zygote.start([command, *args], environment, self.log_path)
            else:
                self.proc = subprocess.Popen(
                    sundial_cmd(command, *args),
                    env=environment,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=REPO,
                )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text()

    # A bound on a hang only: a Python service starting on a busy machine running the
    # suite in parallel took over 20 s to log that it started.
    def wait_for_log(self, text: str, timeout: float = 60) -> None:
        wait_until(lambda: text in self.log(), f"{text!r} in {self.name} log", timeout, self)

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout)


@contextmanager
def services(db_url: str, log_dir: Path) -> Iterator[Callable[..., Service]]:
    """A factory of services that are all killed when the block ends."""
    started: list[Service] = []

    def start(command: str, *args: str, **env: str) -> Service:
        service = Service(db_url, log_dir, command, *args, **env)
        started.append(service)
        return service

    try:
        yield start
    finally:
        for service in started:
            if service.proc.poll() is None:
                service.signal(signal.SIGCONT)
                service.kill()


def query(db_url: str, sql: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return [dict(r) for r in conn.execute(sql, params).fetchall()]  # type: ignore[arg-type]


def status_counts(db_url: str) -> dict[str, int]:
    rows = query(db_url, "SELECT status, count(*) AS n FROM job_runs GROUP BY status")
    return {r["status"]: r["n"] for r in rows}


def run_row(db_url: str, run_id: int) -> dict[str, Any]:
    (row,) = query(db_url, "SELECT * FROM job_runs WHERE id = %s", run_id)
    return row


def finish_run(conn: psycopg.Connection[Any], run_id: int, outcome: Outcome | None = None) -> None:
    """Claim exactly that run (it must be pending and due) and finish it, in this process."""
    conn.execute("UPDATE job_runs SET priority = 100 WHERE id = %s", (run_id,))
    (job,) = transitions.claim(conn, "w", 1, 30)
    assert job.run_id == run_id, f"run {run_id} was not the next due run"
    transitions.finish_many(
        conn, "w", [transitions.Finish(run_id, job.attempt, outcome or Outcome.completed())]
    )


@contextmanager
def private_postgres(**settings: str) -> Iterator[Any]:
    """A private embedded PostgreSQL that a test may restart, stop or starve, started with
    `settings` (ALTER SYSTEM, then a restart), deleted afterwards.

    Its folder is world-readable because, run as root, the server runs as its own user.
    """
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="sundial-pg-"))
    folder.chmod(0o755)
    server = pgserver.get_server(folder / "pg", cleanup_mode="delete")
    try:
        if settings:
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                for name, value in settings.items():
                    conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")  # type: ignore[arg-type]
            pg_ctl(server, "restart")
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def pg_ctl(server: Any, action: str) -> None:
    """`pg_ctl -w <action> -m fast` on a private server. `restart` also starts a stopped
    server, with the options it last ran with."""
    from pgserver._commands import pg_ctl as run_pg_ctl

    run_pg_ctl(
        ["-w", action, "-m", "fast"], pgdata=server.pgdata, user=server.system_user, timeout=60
    )


# How many worker deaths under a run of a job with the default crash limit quarantine it.
QUARANTINE_DEATHS = limits.WORKER_DEATHS_PER_CRASH * limits.DEFAULT_MAX_CRASHES


def one_crash_from_quarantine(conn: Any, *run_ids: int) -> None:
    """Set these runs up as if their workers had died under them all but once: the next
    expired lease of theirs quarantines them (after QUARANTINE_DEATHS deaths)."""
    conn.execute(
        "UPDATE job_runs SET crash_count = %s WHERE id = ANY(%s)",
        (QUARANTINE_DEATHS - 1, list(run_ids)),
    )
