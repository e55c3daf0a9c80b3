"""Shared fixtures: a real PostgreSQL, a clean database per test, live server, browser.

Database: `TEST_DATABASE_URL` or `DATABASE_URL` when set (the role needs CREATEDB),
otherwise an embedded PostgreSQL (pgserver) under `.sundial/test-pg`. Each test gets
its own database cloned from a migrated template, so tests never see each other's rows.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from hypothesis import settings

from app.core import migrate
from app.core.db import normalize_url
from tests.waits import wait_until

REPO = Path(__file__).resolve().parent.parent
EMBEDDED_TEST_DIR = REPO / ".sundial" / "test-pg"
CHROMIUM_FALLBACK = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_counter = itertools.count()

# Generated cases differ on every local run, to explore; under CI they are the same each
# time, so a submission's result does not hang on which cases a seed drew.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` on the same server."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def worker_tag(config: pytest.Config) -> str:
    """Distinguishes pytest-xdist workers (gw0, gw1, …) so their databases never clash."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--serial",
        choices=("include", "skip", "only"),
        default="include",
        help="tests marked `serial`: run them with the rest (include), leave them out (skip) "
        "or run only them (only); .ci/run runs the rest in parallel, then these alone",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mode = config.getoption("--serial")
    if mode == "include":
        return
    wanted = mode == "only"
    keep = [item for item in items if (item.get_closest_marker("serial") is not None) == wanted]
    dropped = [item for item in items if item not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """Admin URL of the PostgreSQL server the tests create their databases on."""
    configured = os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if configured:
        yield normalize_url(configured)
        return
    import pgserver

    EMBEDDED_TEST_DIR.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(EMBEDDED_TEST_DIR, cleanup_mode="stop")
    yield str(server.get_uri())


@pytest.fixture(scope="session")
def template_db(server_url: str, pytestconfig: pytest.Config) -> Iterator[str]:
    """Name of a freshly migrated template database, built once per test session.

    The name carries the process id, so test sessions running at once on one server
    never rebuild each other's template.
    """
    name = f"sundial_tpl_{worker_tag(pytestconfig)}_{os.getpid()}"
    with migrated_database(server_url, name):
        yield name


@contextmanager
def migrated_database(server_url: str, name: str) -> Iterator[None]:
    """Database `name`, created afresh and migrated, dropped afterwards; dropped at once
    when the migration fails, so a failed run leaves no half-migrated template behind."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate.upgrade(with_database(server_url, name))
        yield
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(server_url: str, template_db: str, pytestconfig: pytest.Config) -> Iterator[str]:
    """URL of a migrated database that belongs to this test alone."""
    name = f"sundial_t_{worker_tag(pytestconfig)}_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}" STRATEGY FILE_COPY')
    yield with_database(server_url, name)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_db_url(server_url: str, pytestconfig: pytest.Config) -> Iterator[str]:
    """URL of a database with no tables at all, for migration tests."""
    name = f"sundial_e_{worker_tag(pytestconfig)}_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield with_database(server_url, name)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def open_tmp_path() -> Iterator[Path]:
    """A fresh folder for an embedded PostgreSQL. Run as root, pgserver runs the server as
    its own user, who cannot reach `tmp_path`: every pytest session that starts on the
    machine (or the next xdist run) resets /tmp/pytest-of-<user> to mode 0700."""
    folder = Path(tempfile.mkdtemp(prefix="sundial-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to this test's database, with dict rows."""
    from psycopg.rows import dict_row

    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as c:
        yield c


def sundial_env(db_url: str, **extra: str) -> dict[str, str]:
    """Environment for a `sundial` child process pointed at `db_url`."""
    env = dict(os.environ)
    env.pop("TEST_DATABASE_URL", None)
    env.update(
        DATABASE_URL=db_url,
        SUNDIAL_LOG_FORMAT="text",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def sundial_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", *args]


def start_dev(env: dict[str, str], port: int, log_path: Path) -> subprocess.Popen[bytes]:
    """`sundial dev --port PORT` in a session of its own (stop it with its group), its
    output in `log_path`."""
    with log_path.open("w") as log:
        return subprocess.Popen(
            sundial_cmd("dev", "--port", str(port)),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )


def run_sundial(db_url: str | None, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the real `sundial` command to completion and capture its output."""
    environment = sundial_env(db_url, **env) if db_url else {**os.environ, **env}
    return subprocess.run(
        sundial_cmd(*args),
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def wait_for_http(
    url: str, timeout: float = 20.0, proc: subprocess.Popen[Any] | None = None
) -> None:
    def answers() -> bool:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    wait_until(answers, f"{url} to answer", timeout)


@pytest.fixture
def live_server(db_url: str, tmp_path: Path) -> Iterator[str]:
    """Base URL of a real `sundial web` process (uvicorn) on a free port."""
    port = free_port()
    log_path = tmp_path / "web.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            sundial_cmd("web", "--host", "127.0.0.1", "--port", str(port)),
            env=sundial_env(db_url),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/healthz", proc=proc)
        yield base
    except Exception:
        print(log_path.read_text())
        raise
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _launch_chromium(playwright: Any) -> Any:
    """Playwright's own Chromium when installed, the system Chromium otherwise."""
    try:
        return playwright.chromium.launch(args=CHROMIUM_ARGS)
    except Exception as managed_error:
        fallback = shutil.which("chromium") or CHROMIUM_FALLBACK
        if not Path(fallback).exists():
            raise RuntimeError(
                "no browser for Playwright: run `python -m playwright install chromium` "
                "or install the system chromium package"
            ) from managed_error
        return playwright.chromium.launch(executable_path=fallback, args=CHROMIUM_ARGS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One browser per test module: Playwright's sync API keeps an event loop running in
    this thread while it lives, which would break `asyncio.run` in other tests."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = _launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()
