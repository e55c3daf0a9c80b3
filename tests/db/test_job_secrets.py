"""A `shell` job searches everything it can read for the worker's database URL and secret
key, with the worker running as an ordinary (non-root) user: found nowhere."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from app.handlers.gate import set_shell_enabled
from app.runs import submission
from app.runs.run_inserts import NewRun
from tests.helpers.commands import REPO, sundial_env
from tests.helpers.processes import FAST_SERVICE_ENV, run_row
from tests.helpers.waits import wait_until

# new for every run, so that no file (this one included) holds them before the worker starts
PASSWORD_MARK = f"pw-{secrets.token_hex(6)}"
KEY_MARK = f"key-{secrets.token_hex(6)}"

# The command looks for the marks without carrying them: it gets them reversed, so its own
# command line and memory map do not count as a finding.
SEARCH = r"""
import glob, os, sys
marks = [m[::-1].encode() for m in sys.argv[1:]]
found = []
def check(path):
    try:
        with open(path, "rb") as f:
            data = f.read(4_000_000)
    except Exception:
        return
    if any(m in data for m in marks):
        found.append(path)
for proc in glob.glob("/proc/[0-9]*"):
    for name in ("environ", "cmdline", "mem", "maps"):
        check(f"{proc}/{name}")
    try:
        for fd in os.listdir(f"{proc}/fd"):
            target = os.readlink(f"{proc}/fd/{fd}")
            if target.startswith("/") and os.path.isfile(target):
                check(target)
    except Exception:
        pass
for root in ("/tmp", "/dev/shm", "/var/tmp", os.path.expanduser("~"), os.getcwd()):
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", ".venv", "node_modules")]
        for name in files:
            check(os.path.join(folder, name))
print(os.getuid(), sorted(set(found)))
"""


def _as_nobody() -> list[str]:
    if os.geteuid() != 0:
        pytest.skip("starting a worker as another user needs root")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _python_for(prefix: list[str]) -> tuple[list[str], dict[str, str]]:
    """An interpreter the ordinary user may run, with this checkout's packages: this one, or
    (where it lives in a folder closed to that user) the system's Python of the same minor
    version, given this environment's site-packages."""
    here = os.path.realpath(sys.executable)
    if subprocess.run([*prefix, "test", "-x", here]).returncode == 0:
        return [sys.executable], {}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(version, path="/usr/local/bin:/usr/bin")
    if system is None:
        pytest.skip(f"no {version} that an ordinary user may run")
    packages = [p for p in sys.path if p.endswith("site-packages")]
    return [system], {"PYTHONPATH": os.pathsep.join([str(REPO), *packages])}


def _with_password(url: str) -> str:
    parts = urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user or 'postgres'}:{PASSWORD_MARK}@{host}"))


@pytest.mark.timeout(180)
def test_a_shell_job_finds_no_secret_of_a_non_root_worker(
    db_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    prefix = _as_nobody()
    set_shell_enabled(conn, True, actor="test")
    env = sundial_env(
        _with_password(db_url), **FAST_SERVICE_ENV, SECRET_KEY=KEY_MARK + "-long-enough-key"
    )
    env["HOME"] = "/tmp"
    python, extra_env = _python_for(prefix)
    env.update(extra_env)
    search = ["python3", "-c", SEARCH, PASSWORD_MARK[::-1], KEY_MARK[::-1]]
    submitted = [
        submission.submit(
            conn, NewRun("shell", {"command": search, "timeout": 120}, execution_model=m)
        )
        for m in ("thread", "subprocess", "async")
    ]
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [*prefix, *python, "-m", "app.cli", "worker"],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        for run in submitted:
            wait_until(
                lambda run=run: run_row(db_url, run.id)["status"] in ("completed", "failed"),
                f"shell run {run.id} ended",
                timeout=150,
            )
        for run in submitted:
            row = run_row(db_url, run.id)
            assert row["status"] == "completed", (row["last_error"], log.read_text())
            uid, found = row["result"]["stdout"].split(" ", 1)
            assert uid != "0"  # the search really ran as an ordinary user
            assert found.strip() == "[]", found
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
