"""Live pages' tests: a web process on a port, a run submitted, and the listeners the
database counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.runs import run_inserts, submission
from app.web.events import LISTENER_NAME
from tests.helpers.browser import sign_in_page
from tests.helpers.commands import free_port, wait_for_http
from tests.helpers.people import make_user
from tests.helpers.processes import Service
from tests.helpers.waits import wait_until


def start_web(start: Start, port: int) -> tuple[Service, str]:
    web = start("web", "--host", "127.0.0.1", "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    wait_for_http(f"{base}/healthz", timeout=90, proc=web.proc)  # a loaded machine is slow
    return web, base


def sign_in_live(start: Start, db_url: str, page: Any, role: str = "operator") -> str:
    """A web process started, a user of `role` signed in on `page` (as "oncall") and the
    web process listening for changes: the base URL."""
    _, base = start_web(start, free_port())
    make_user(db_url, "oncall", role)
    sign_in_page(page, base, "oncall")
    wait_until(lambda: listener_count(db_url) == 1, "the web process to LISTEN")
    return base


def submit(db_url: str, handler: str = "noop", **args: Any) -> int:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return submission.submit(conn, run_inserts.NewRun(handler=handler, args=args)).id


def listener_count(db_url: str) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND datname = current_database()",
            [LISTENER_NAME],
        ).fetchone()
    return int(row[0]) if row else 0


Start = Callable[..., Service]
