"""The dashboard in a real browser against a real `sundial web` process."""

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import psycopg


def test_home_page_renders_with_htmx_loaded(
    live_server: str, signed_in: Callable[[str], Any]
) -> None:
    page = signed_in("viewer")
    page.goto(live_server + "/")
    assert page.title() == "Overview · Sundial"
    assert page.get_by_role("heading", name="Overview").is_visible()
    assert page.locator("#run-counts .count").count() == 8
    # the vendored htmx was served and executed
    assert page.evaluate("typeof htmx !== 'undefined' && htmx.version") == "2.0.11"


def test_home_page_counts_runs_in_the_database(
    live_server: str, db_url: str, signed_in: Callable[[str], Any]
) -> None:
    page = signed_in("viewer")
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO job_runs (handler, status) "
            "SELECT 'noop', 'pending' FROM generate_series(1, 3)"
        )
        conn.execute("INSERT INTO job_runs (handler, status) VALUES ('noop', 'failed')")
    page.goto(live_server + "/")
    assert page.locator('[data-status="pending"] .count-value').inner_text() == "3"
    assert page.locator('[data-status="failed"] .count-value').inner_text() == "1"


def test_healthz_reports_database_ok(live_server: str) -> None:
    with urllib.request.urlopen(live_server + "/healthz") as response:
        assert response.status == 200
        assert json.load(response) == {"status": "ok", "database": "ok"}


def test_a_page_asks_a_visitor_to_sign_in(live_server: str, page: Any) -> None:
    page.goto(live_server + "/jobs")
    assert page.title() == "Sign in · Sundial"
    assert page.url.endswith("/login?next=%2Fjobs")


def test_static_files_are_served(live_server: str) -> None:
    with urllib.request.urlopen(live_server + "/static/vendor/htmx/htmx-2.0.11.min.js") as r:
        assert r.status == 200
        assert b"htmx" in r.read(2000)
