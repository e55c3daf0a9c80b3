"""An operator backfills a schedule from its page in a real browser, against a real
`sundial web`, trigger and worker: fills the range by its labels, sees the preview (count,
first and last in the schedule's zone, the spring-forward night in words, one at a time
because the schedule skips overlaps), starts it, watches its progress move live, and
cancels it with a confirmation. Looked at, at 1280 and 390 px, at each step."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_spec import ScheduleSpec
from app.scheduling.schedules import create_schedule
from tests.helpers.browser import look_at_both_widths, sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import query, services

SHOTS = Path("/tmp/shots/backfill")
# The backfill list fetched again and swapped in, as a live update does; done once swapped.
REFRESH_LIST = """() => {
    const list = document.getElementById("backfill-list");
    return htmx.ajax("GET", list.getAttribute("hx-get"),
                     {source: list, target: list, swap: "outerHTML"});
}"""


def test_an_operator_previews_starts_follows_and_cancels_a_backfill(
    live_server: str, db_url: str, browser: Any, tmp_path: Path
) -> None:
    make_user(db_url, "ops", "operator")
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        create_schedule(conn, ScheduleSpec(
            name="nightly", cron="30 2 * * *", timezone="Europe/Berlin", handler="sleep",
            args={"seconds": 2}, overlap=OverlapPolicy.SKIP,
        ))  # fmt: skip
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        sign_in_page(page, live_server, "ops")
        page.goto(live_server + "/schedules/nightly")
        section = page.locator("#backfills")
        expect(section.get_by_role("heading", name="Run past times (backfill)")).to_be_visible()
        page.get_by_label("From (Europe/Berlin time)").fill("2026-03-22T00:00")
        page.get_by_label("To (Europe/Berlin time, included)").fill("2026-03-31T23:00")
        page.get_by_label("How many may run at once").fill("2")
        page.get_by_role("button", name="Show what it will run").click()
        preview = page.locator("#backfill-preview-result")
        expect(preview.locator("#backfill-count")).to_contain_text(
            "10 runs: the first for 2026-03-22 02:30 CET, the last for 2026-03-31 02:30 CEST"
        )
        expect(preview.locator("#backfill-dst")).to_contain_text(
            "02:30 does not exist on 29 Mar (the clocks jump forward); runs at 03:00"
        )
        expect(preview.locator("#backfill-overlap")).to_contain_text("one at a time (not 2)")
        assert query(db_url, "SELECT id FROM backfills") == []
        look_at_both_widths(page, SHOTS, "preview")

        with services(db_url, tmp_path) as start:
            start("trigger", SUNDIAL_TRIGGER_INTERVAL_SECONDS="0.3")
            start("worker")
            page.get_by_role("button", name="Start backfill of 10 runs").click()
            page.wait_for_url("**done=backfill-started**")
            expect(page.get_by_role("status")).to_contain_text("Backfill started")
            counts = page.locator(".backfill-counts")
            # live: the worker finishes runs and the list follows without a reload
            expect(counts).to_contain_text("1 running", timeout=30_000)
            expect(counts).to_contain_text(re.compile(r"[1-9]\d* done"), timeout=30_000)
            look_at_both_widths(page, SHOTS, "progress")

            page.get_by_role("button", name="Cancel backfill").click()  # not confirmed yet
            expect(page.locator("#backfill-list")).to_contain_text(": running")
            page.get_by_label("Yes, cancel this backfill").check()
            # The list refreshes itself as runs change (as it may at any moment here): the
            # tick survives it, or the click after it would be refused for want of one.
            page.evaluate(REFRESH_LIST)
            expect(page.get_by_label("Yes, cancel this backfill")).to_be_checked()
            page.get_by_role("button", name="Cancel backfill").click()
            page.wait_for_url("**done=backfill-cancelled**")
            expect(page.locator("#backfill-list")).to_contain_text(": cancelled")
            expect(page.get_by_role("button", name="Cancel backfill")).to_have_count(0)
            look_at_both_widths(page, SHOTS, "cancelled")
        (row,) = query(db_url, "SELECT status FROM backfills")
        assert row["status"] == "cancelled"
    finally:
        context.close()
