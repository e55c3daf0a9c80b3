"""A viewer finds runs by what they carried on the Runs page in a real browser: types
`customer_id = 42` in the *Arguments or result* box and sees the runs submitted with 42 and
with "42" (one ended, one waiting) and no other; a nested field narrows it; a search that
cannot be read is a sentence next to the table. The page passes axe-core at 1280 and 390
px; screenshots go to /tmp/shots/run-search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import transitions
from app.runs.run_inserts import NewRun
from tests.helpers.browser import look_at_both_widths, sign_in_page
from tests.helpers.people import make_user
from tests.helpers.workers import submit

SHOTS = Path("/tmp/shots/run-search")


def _runs(db_url: str) -> dict[str, int]:
    """An ended run with 42, another with 7 in the EU, then waiting runs with "42" and 8."""
    ended = submit(
        db_url,
        NewRun("noop", {"customer_id": 42, "order": {"region": "us"}}),
        NewRun("noop", {"customer_id": 7, "order": {"region": "eu"}}),
    )
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        claimed = transitions.claim(conn, "w-test", 10, 30)
        done = Outcome(OutcomeStatus.COMPLETED, result={"sent": True})
        transitions.finish_many(
            conn, "w-test", [transitions.Finish(c.run_id, c.attempt, done) for c in claimed]
        )
    waiting = submit(db_url, NewRun("noop", {"customer_id": "42"}), NewRun("noop", {"n": 8}))
    return {"ended 42": ended[0], "eu": ended[1], "waiting 42": waiting[0], "other": waiting[1]}


def _shown(page: Any) -> list[int]:
    rows = page.locator("#runs-table tbody tr")
    return [int(i.removeprefix("run-")) for i in rows.evaluate_all("rs => rs.map(r => r.id)")]


def test_a_viewer_finds_runs_by_their_arguments(
    live_server: str, db_url: str, browser: Any
) -> None:
    runs = _runs(db_url)
    make_user(db_url, "viewer", "viewer")
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in_page(page, live_server, "viewer")
        page.get_by_role("link", name="Runs").first.click()
        page.wait_for_url("**/runs")
        expect(page.locator("#runs-table tbody tr")).to_have_count(4)

        search = page.get_by_label("Arguments or result")
        search.fill("customer_id = 42")
        search.press("Enter")
        page.wait_for_url("**search=customer_id**")
        expect(page.locator("#runs-table tbody tr")).to_have_count(2)
        assert _shown(page) == [runs["waiting 42"], runs["ended 42"]]
        look_at_both_widths(page, SHOTS, "customer-42")

        search.fill("order.region = eu")
        search.press("Enter")
        expect(page.locator(f"#run-{runs['eu']}")).to_be_visible()
        expect(page.locator("#runs-table tbody tr")).to_have_count(1)

        search.fill('customer_id = "42" and result.sent = true')
        search.press("Enter")
        expect(page.get_by_text("No runs match.")).to_be_visible()

        search.fill("customer_id")
        search.press("Enter")
        expect(page.get_by_role("alert")).to_contain_text(
            "Write the search as field = value, for example customer_id = 42"
        )
        look_at_both_widths(page, SHOTS, "cannot-read")
    finally:
        context.close()
