"""A run's history on its page, live, against real `sundial web` and `sundial worker`
processes: a job fails, is tried again, fails for good; an operator retries it from the
page and the history says so by name; a long job the operator cancels says who asked and
which worker stopped it. Read by role and label; the page fits 1280 and 390 px and passes
axe-core; screenshots go to /tmp/shots/history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.runs import submission
from app.runs.run_inserts import NewRun
from tests.helpers.browser import look_at_both_widths
from tests.helpers.live import Start, sign_in_live

SHOTS = Path("/tmp/shots/history")


def _submit(db_url: str, run: NewRun) -> int:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return submission.submit(conn, run).id


def _worker_id(db_url: str) -> str:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        row = conn.execute("SELECT id FROM workers WHERE stopped_at IS NULL").fetchone()
    assert row is not None
    return str(row["id"])


def _expect_events(history: Any, told: list[tuple[str, str]]) -> None:
    """The history's items, oldest first, each saying what happened and by whom."""
    items = history.get_by_role("listitem")
    expect(items).to_have_count(len(told), timeout=20_000)
    for n, (what, who) in enumerate(told):
        expect(items.nth(n)).to_contain_text(what)
        expect(items.nth(n)).to_contain_text(who)


def test_the_history_follows_a_run_live_and_names_who_did_what(
    start: Start, db_url: str, page: Any
) -> None:
    start("worker")
    base = sign_in_live(start, db_url, page, "operator")
    page.set_default_timeout(20_000)

    run_id = _submit(db_url, NewRun("fail", args={"message": "the ledger said no"}, max_retries=1))
    page.goto(f"{base}/runs/{run_id}")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("h1 .badge")).to_have_text("failed", timeout=20_000)  # waits <= 2 s
    worker = f"By worker {_worker_id(db_url)}"
    history = page.get_by_role("list", name="History")
    _expect_events(history, [
        ("Submitted", "By unknown"),
        ("Attempt 1 started", worker),
        ("Attempt 1 failed; it will be tried again", worker),
        ("Attempt 2 started", worker),
        ("Failed for good: a dead letter, not tried again", worker),
    ])  # fmt: skip
    expect(history.get_by_role("listitem").nth(2)).to_contain_text("the ledger said no")
    look_at_both_widths(page, SHOTS, "failed")

    page.get_by_role("button", name="Retry run").click()
    expect(history.get_by_role("listitem").nth(5)).to_contain_text("By oncall", timeout=20_000)
    # again, after attempts 3 and 4 (up to 8 s apart: attempt 3's backoff)
    expect(page.locator("h1 .badge")).to_have_text("failed", timeout=30_000)
    _expect_events(history, [
        ("Submitted", "By unknown"),
        ("Attempt 1 started", worker),
        ("Attempt 1 failed; it will be tried again", worker),
        ("Attempt 2 started", worker),
        ("Failed for good: a dead letter, not tried again", worker),
        ("Retried, with a fresh retry budget", "By oncall"),
        ("Attempt 3 started", worker),
        ("Attempt 3 failed; it will be tried again", worker),
        ("Attempt 4 started", worker),
        ("Failed for good: a dead letter, not tried again", worker),
    ])  # fmt: skip
    assert page.evaluate("window.notReloaded === true"), "the page was reloaded"

    long_id = _submit(db_url, NewRun("sleep", args={"seconds": 120}))
    page.goto(f"{base}/runs/{long_id}")
    expect(page.locator("h1 .badge")).to_have_text("running", timeout=20_000)
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("h1 .badge")).to_have_text("cancelled", timeout=20_000)
    _expect_events(history, [
        ("Submitted", "By unknown"),
        ("Attempt 1 started", worker),
        ("Asked to stop", "By oncall"),
        ("Cancelled: its worker stopped it, as was asked", worker),
    ])  # fmt: skip
    look_at_both_widths(page, SHOTS, "cancelled")
