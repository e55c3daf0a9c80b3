"""The page of a run that moved to the history, in a real browser: it reads whole (its
error, attempt and events), says it is in the history, and offers Re-run where a hot run
offers Retry; the re-run's confirmation counts the one run. Looked at, at 1280 and 390 px."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.core.config import Settings
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission
from app.runs.run_inserts import NewRun
from app.services.reaper import Reaper
from tests.helpers.browser import look_at_both_widths, sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import finish_run
from tests.helpers.waits import db_now

SHOTS = Path("/tmp/shots/history")


def test_a_moved_runs_page_reads_whole_and_offers_a_re_run(
    live_server: str, db_url: str, browser: Any
) -> None:
    make_user(db_url, "ops", "operator")
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        run_id = submission.submit(conn, NewRun("report", {"customer_id": 42})).id
        error = "KeyError: 'rows' " + "while reading the nightly export " * 4
        finish_run(conn, run_id, Outcome(OutcomeStatus.FAILED, error=error, retryable=False))
        later = db_now(conn) + timedelta(days=8)  # dead letters move after a week
        assert Reaper(Settings.from_env({})).move_to_history(conn, later).runs == 1
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        sign_in_page(page, live_server, "ops")
        page.goto(f"{live_server}/runs/{run_id}")
        expect(page.locator("#run-in-history")).to_contain_text("in the history")
        expect(page.get_by_role("button", name="Retry run")).to_have_count(0)
        expect(page.locator(".events")).to_contain_text("Attempt 1 started")
        look_at_both_widths(page, SHOTS, "moved-run")
        page.get_by_role("link", name="Re-run…").click()
        expect(page.get_by_role("button", name="Yes, re-run 1 run")).to_be_visible()
    finally:
        context.close()
