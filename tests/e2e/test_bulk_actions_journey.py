"""An operator cancels every run a filter matches from the runs page in a real browser:
filters, ticks a run (the count follows), chooses every matching run instead, reads the
count in words and confirms, and watches the progress end in the result. Each page passes
axe-core at 1280 and 390 px; screenshots go to /tmp/shots/bulk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.runs import run_inserts, submission
from tests.helpers.browser import look_at_both_widths, sign_in_page
from tests.helpers.people import make_user

SHOTS = Path("/tmp/shots/bulk")


def _top(page: Any, name: str) -> None:
    """What a person sees first, at both widths (the full pages are long)."""
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SHOTS / f"{name}-top-{width}.png"))
    page.set_viewport_size({"width": 1280, "height": 900})


def test_an_operator_cancels_every_run_a_filter_matches(
    live_server: str, db_url: str, browser: Any
) -> None:
    make_user(db_url, "ops", "operator")
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        runs = [run_inserts.NewRun("nightly-report", args={"day": i}) for i in range(2500)]
        submission.submit_many(conn, [*runs, *[run_inserts.NewRun("noop")] * 3])
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        sign_in_page(page, live_server, "ops")
        page.goto(f"{live_server}/runs")
        page.get_by_label("Job or handler").fill("nightly-report")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url("**job=nightly-report**")
        expect(page.locator("#runs-table tbody tr").first).to_contain_text("nightly-report")
        first = page.locator('#runs-table input[name="run"]').first
        first.check()
        expect(page.locator("#ticked-count")).to_have_text("1")
        expect(page.get_by_label("Only the runs ticked below")).to_be_checked()
        look_at_both_widths(page, SHOTS, "runs")
        _top(page, "runs")

        page.get_by_label("What to do").select_option("cancel")
        page.get_by_label("Every run matching the filter above").check()
        page.get_by_role("button", name="Continue…").click()
        page.wait_for_url("**/runs/bulk?**")
        expect(page.get_by_role("status")).to_contain_text(
            "Cancel 2,500 runs matching: job nightly-report?"
        )
        look_at_both_widths(page, SHOTS, "confirm")
        page.get_by_role("button", name="Yes, cancel 2,500 runs").click()
        page.wait_for_url("**/runs?job=nightly-report**")
        panel = page.locator("#bulk-progress")
        expect(panel).to_contain_text("Cancel 2,500 runs matching: job nightly-report")
        expect(panel).to_contain_text("Done: 2,500 cancelled.", timeout=60_000)
        expect(page.locator("#runs-table tbody tr").first).to_contain_text("cancelled")
        look_at_both_widths(page, SHOTS, "done")
        _top(page, "done")
    finally:
        context.close()
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT handler, status, count(*) AS n FROM job_runs GROUP BY 1, 2 ORDER BY 1"
        ).fetchall()
        audit = conn.execute("SELECT action, details FROM audit_log WHERE actor = 'ops'")
        entries = audit.fetchall()
    assert [(r["handler"], r["status"], r["n"]) for r in rows] == [
        ("nightly-report", "cancelled", 2500),
        ("noop", "pending", 3),
    ]
    assert [e["action"] for e in entries] == ["runs.bulk_cancel"]
    assert entries[0]["details"]["after"]["count"] == 2500
