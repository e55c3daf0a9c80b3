"""`sundial dev` runs every Procfile process; with no DATABASE_URL the embedded one is used."""

import os
import re
import signal
import stat
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.people import users
from tests.helpers.commands import free_port, run_sundial, start_dev, sundial_env, wait_for_http
from tests.helpers.processes import wait_until


def test_dev_runs_every_procfile_process_and_stops_them(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "dev.log"
    proc = start_dev(sundial_env(db_url), port, log_path)
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


def _start_dev(db_url: str, port: int, data_dir: Path, log_path: Path) -> subprocess.Popen[bytes]:
    env = sundial_env(db_url, SUNDIAL_DATA_DIR=str(data_dir))
    env.pop("SECRET_KEY", None)  # `sundial dev` keeps its own in the data folder
    proc = start_dev(env, port, log_path)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=60, proc=proc)
        wait_until(lambda: "Sign in as the local admin" in log_path.read_text(), "the link")
    except BaseException:
        _stop_dev(proc)
        print(log_path.read_text())
        raise
    return proc


def _stop_dev(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(60)


def _listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp* writes them) listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def _signed_in(opener: urllib.request.OpenerDirector, base: str) -> bool:
    with opener.open(f"{base}/", timeout=10) as response:
        return "/login" not in response.geturl()


def test_dev_keeps_its_admin_and_sign_ins_across_restarts(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    data_dir = tmp_path / "data"
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())

    proc = _start_dev(db_url, port, data_dir, first_log)
    try:
        assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
        output = first_log.read_text()
        password = re.search(r"Local admin created: user admin, password (\S+)", output)
        assert password, output
        link = re.search(r"/login/link\?token=\S+", output)
        assert link, output
        assert not _signed_in(browser, base)
        browser.open(f"{base}{link.group(0)}", timeout=10).close()
        assert _signed_in(browser, base)
    finally:
        _stop_dev(proc)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        admin = users.sign_in(conn, "admin", password.group(1), address="127.0.0.1")
        assert admin is not None and admin.role.value == "admin"

    proc = _start_dev(db_url, port, data_dir, second_log)
    try:
        assert _signed_in(browser, base)  # the session from before the restart holds
        output = second_log.read_text()
        assert password.group(1) not in output  # shown on the first start only
        assert "Local admin created" not in output
    finally:
        _stop_dev(proc)
    assert stat.S_IMODE((data_dir / "dev-secret-key").stat().st_mode) == 0o600
