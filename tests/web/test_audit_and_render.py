"""The audit page's filters, and one URL serving a page or, to htmx, its fragment."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from app.people import audit


def test_the_audit_log_filters_by_person_action_and_day(
    as_role: Callable[[str], TestClient], conn: psycopg.Connection[Any]
) -> None:
    client = as_role("viewer")
    audit.record(conn, "alice", "job.create", "job", "a", after={"x": 1})
    audit.record(conn, "bob", "job.update", "job", "b", before={"x": 1}, after={"x": 2})
    conn.execute("UPDATE audit_log SET at = '2026-01-02T10:00Z' WHERE actor = 'bob'")

    def rows(query: str) -> str:
        return client.get("/audit" + query).text.split("<tbody>")[-1]

    assert "alice" in rows("?actor=alice") and "bob" not in rows("?actor=alice")
    assert "job.update" in rows("?action=job.update") and "alice" not in rows("?action=job.update")
    on_the_day = rows("?from=2026-01-02&to=2026-01-02")
    assert "bob" in on_the_day and "alice" not in on_the_day
    assert "<del>1</del> → <ins>2</ins>" in on_the_day
    bad = client.get("/audit?from=yesterday").text
    assert "Dates are written 2026-12-01; this filter was ignored: from." in bad


def test_times_and_days_are_on_the_viewers_clock_everywhere(
    as_role: Callable[[str], TestClient], conn: psycopg.Connection[Any]
) -> None:
    """A viewer in Tokyo (the zone their browser reported) reads every time on Tokyo's
    clock, and a day filter means Tokyo's day; UTC until the browser said."""
    client = as_role("admin")
    audit.record(conn, "carol", "job.delete", "job", "c", before={"x": 1})
    # 23:30 UTC on 1 January is 08:30 on 2 January in Tokyo
    conn.execute("UPDATE audit_log SET at = '2026-01-01T23:30Z' WHERE actor = 'carol'")
    assert "2026-01-01 23:30 UTC" in client.get("/audit").text
    client.cookies.set("sundial_zone", "Asia/Tokyo")
    page = client.get("/audit").text
    assert "2026-01-02 08:30 JST" in page and "From (day, Asia/Tokyo)" in page
    assert "carol" in client.get("/audit?from=2026-01-02&to=2026-01-02").text.split("<tbody>")[-1]
    assert "No changes match." in client.get("/audit?from=2026-01-01&to=2026-01-01").text
    for path in ("/", "/runs", "/tokens", "/workers", "/jobs"):
        assert " UTC<" not in client.get(path).text, path


def test_htmx_gets_the_fragment_and_a_browser_the_page(
    as_role: Callable[[str], TestClient],
) -> None:
    client = as_role("viewer")
    page = client.get("/jobs")
    fragment = client.get("/jobs", headers={"HX-Request": "true"})
    assert page.headers["vary"] == fragment.headers["vary"] == "HX-Request"
    assert page.text.startswith("<!doctype html>") and 'id="jobs-table"' in page.text
    assert fragment.text.lstrip().startswith('<div id="jobs-table">')
    assert "<html" not in fragment.text


def test_asset_and_page_urls_never_come_from_the_host_header(
    as_role: Callable[[str], TestClient],
) -> None:
    page = as_role("viewer").get("/", headers={"Host": "evil.example"}).text
    assert 'href="/static/sundial.css"' in page
    assert 'src="/static/vendor/htmx/htmx-2.0.11.min.js"' in page
    assert "evil.example" not in page
