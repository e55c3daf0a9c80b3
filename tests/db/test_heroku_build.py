"""Heroku as is: the buildpack's install of requirements.txt in a fresh virtualenv, then the
release and web commands of the Procfile on $PORT; and `honcho start` serving the web on
$PORT with the shipped Procfile."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.helpers.commands import REPO, free_port, wait_for_http

REQUIREMENTS = REPO / "requirements.txt"


def _name(requirement: str) -> str:
    """`psycopg[binary,pool]>=3.2` -> `psycopg`, normalised as pip compares names."""
    name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[_name(name)] = version.strip()
    return pins


def test_requirements_pin_every_dependency_and_leave_the_embedded_database_out() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = _pins()
    missing = [d for d in project["dependencies"] if _name(d) not in pins]
    assert not missing, f"requirements.txt lacks {missing}: regenerate it as its header says"
    assert "pgserver" not in pins
    assert "pgserver>=0.1.4" in project["optional-dependencies"]["dev"]
    assert REQUIREMENTS.read_text().splitlines()[-1] == "."


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TEST_DATABASE_URL")}
    env.pop("VIRTUAL_ENV", None)
    env.update(extra)
    return env


@pytest.mark.timeout(600)
def test_a_fresh_virtualenv_from_requirements_migrates_and_serves_on_port(
    empty_db_url: str, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "-r", "requirements.txt"],
        cwd=REPO,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    check = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.util as u; print(u.find_spec('pgserver'))",
        ],
        capture_output=True,
        text=True,
    )
    assert check.stdout.strip() == "None"  # the slug carries no embedded PostgreSQL
    port = free_port()
    env = _clean_env(
        DATABASE_URL=empty_db_url, PORT=str(port), SECRET_KEY="s" * 40, DYNO="release.1"
    )
    sundial = str(venv / "bin" / "sundial")
    release = subprocess.run(
        [sundial, "migrate", "--then-wait"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert release.returncode == 0 and "migrated database" in release.stdout, release.stderr
    env["DYNO"] = "web.1"
    web = subprocess.Popen(
        [sundial, "web"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=60, proc=web)
    finally:
        web.terminate()
        web.wait(timeout=30)


@pytest.mark.timeout(180)
def test_honcho_start_serves_the_web_process_on_port(db_url: str, tmp_path: Path) -> None:
    """honcho gives $PORT to the first process and stops all when one exits: the web line
    comes first, and the release line stays up after migrating."""
    port = free_port()
    bin_dir = Path(sys.executable).parent
    env = _clean_env(
        DATABASE_URL=db_url,
        PORT=str(port),
        SECRET_KEY="s" * 40,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(REPO),
    )
    log = (tmp_path / "honcho.log").open("w")
    honcho = subprocess.Popen(
        [str(bin_dir / "honcho"), "start", "-f", str(REPO / "Procfile"), "-d", str(REPO)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=90, proc=honcho)
        assert honcho.poll() is None, (tmp_path / "honcho.log").read_text()  # release stayed up
    finally:
        os.killpg(honcho.pid, signal.SIGTERM)
        try:
            honcho.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(honcho.pid, signal.SIGKILL)
            honcho.wait()
        log.close()
