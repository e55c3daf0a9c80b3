"""`sundial dev` runs every Procfile process; with no DATABASE_URL the embedded one is used."""

import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import REPO, free_port, run_sundial, sundial_cmd, sundial_env, wait_for_http
from tests.processes import wait_until


def test_dev_runs_every_procfile_process_and_stops_them(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "dev.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            sundial_cmd("dev", "--port", str(port)),
            env=sundial_env(db_url),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=30, proc=proc)
        wait_until(lambda: _live_workers(db_url) >= 1, "worker registered")
        # The processes' own lines, not honcho's "trigger started (pid=…)": only then have
        # they installed their signal handlers.
        own_lines = ("periodic: trigger started", "periodic: reaper started", "worker started:")
        wait_until(
            lambda: all(line in log_path.read_text() for line in own_lines),
            "every process started",
        )
    except AssertionError:
        print(log_path.read_text())
        raise
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
    output = log_path.read_text()
    for name in ("web", "worker", "trigger", "reaper"):
        assert re.search(rf"^\S+ {name}\s+\| ", output, re.MULTILINE), output
    assert "worker stopped" in output and "trigger stopped" in output, output
    assert "Traceback" not in output, output


def test_embedded_database_starts_migrates_and_stops(open_tmp_path: Path) -> None:
    tmp_path = open_tmp_path  # the embedded server's own user must reach it
    data_dir = tmp_path / "data"
    env = {"SUNDIAL_DATA_DIR": str(data_dir), "DATABASE_URL": ""}
    first = run_sundial(None, "migrate", **env)
    assert first.returncode == 0, first.stderr
    assert "migrated database from empty" in first.stdout
    assert (data_dir / "pgdata" / "PG_VERSION").exists()

    url = run_sundial(None, "db", "url", **env)
    assert url.returncode == 0, url.stderr
    with psycopg.connect(url.stdout.strip()) as conn:
        row: Any = conn.execute("SELECT count(*) FROM job_runs").fetchone()
        assert row[0] == 0

    again = run_sundial(None, "migrate", **env)
    assert "database is up to date" in again.stdout
    stopped = run_sundial(None, "db", "stop", **env)
    assert stopped.returncode == 0, stopped.stderr
    assert "embedded database stopped" in stopped.stdout


def _live_workers(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        row: Any = conn.execute("SELECT count(*) FROM workers WHERE stopped_at IS NULL").fetchone()
        return int(row[0])
