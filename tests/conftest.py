"""Shared fixtures: a real PostgreSQL, a clean database per test, live server, browser.

Database: `TEST_DATABASE_URL` or `DATABASE_URL` when set (the role needs CREATEDB),
otherwise an embedded PostgreSQL (pgserver) under `.sundial/test-pg`. Each test gets
its own database cloned from a migrated template, so tests never see each other's rows.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import settings

from app.core.db import normalize_url
from tests.helpers.commands import REPO, free_port, sundial_cmd, sundial_env, wait_for_http
from tests.helpers.databases import migrated_database, with_database

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

# Tests make hundreds of accounts and sign in as often: at argon2's standard cost each hash
# is 0.2 s of CPU. Every process they start inherits this; tests/db/test_password_hashes.py
# checks the standard cost where it is not set.
os.environ.setdefault("SUNDIAL_PASSWORD_HASH_COST", "minimum")

# Generated cases differ on every local run, to explore; under CI they are the same each
# time, so a submission's result does not hang on which cases a seed drew.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


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


@pytest.fixture
def db_url(server_url: str, template_db: str, pytestconfig: pytest.Config) -> Iterator[str]:
    """URL of a migrated database that belongs to this test alone."""
    name = f"sundial_t_{worker_tag(pytestconfig)}_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}" STRATEGY FILE_COPY')
    from app.runs import queue_limits

    queue_limits.forget()  # what this process read of an earlier test's queues
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
