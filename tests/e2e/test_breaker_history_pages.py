"""In a real browser: an editor names the services a job calls on the job form (a refusal
beside the box), and a run that waited on a paused service tells why in its history. Both
pages pass axe-core at 1280 and 390 px without sideways scroll; screenshots go to
/tmp/shots/breakers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.helpers.browser import look_at_both_widths, sign_in_page
from tests.helpers.people import make_user

SHOTS = Path("/tmp/shots/breakers")


def _check(page: Any, name: str) -> None:
    look_at_both_widths(page, SHOTS, name)


def test_an_editor_names_a_jobs_services_and_a_run_says_why_it_waited(
    live_server: str, db_url: str, browser: Any
) -> None:
    import psycopg
    from psycopg.rows import dict_row

    from app.runs import breakers, submission
    from app.runs.run_inserts import NewRun

    make_user(db_url, "ed", "editor")
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in_page(page, live_server, "ed")
        page.goto(f"{live_server}/jobs/new")
        page.get_by_label("Name", exact=True).fill("charge")
        page.get_by_label("Handler").select_option("noop")
        box = page.get_by_label("Services it calls (one per line or comma-separated)")
        box.fill(", ".join(f"svc-{n}" for n in range(21)))
        page.get_by_role("button", name="Create job").click()
        expect(page.locator("#dependencies-error")).to_contain_text(
            "a job may name at most 20 dependencies"
        )
        _check(page, "job-form-refused")
        box.fill("payments-api\nledger")
        page.get_by_role("button", name="Create job").click()
        page.wait_for_url("**/jobs/charge")
        expect(page.locator("#job-services")).to_contain_text("Its runs call payments-api, ledger")

        with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
            job = conn.execute("SELECT id FROM job_definitions WHERE name = 'charge'").fetchone()
            assert job is not None
            (run,) = submission.submit_many(conn, [NewRun("noop", job_id=job["id"])])
            breakers.open_by_hand(conn, "payments-api", actor="alice",
                                  note="their status page says down")  # fmt: skip
        page.goto(f"{live_server}/runs/{run.id}")
        event = page.locator("li.service-event")
        expect(event).to_contain_text(
            "payments-api paused by alice: their status page says down; the runs that call it wait"
        )
        _check(page, "run-waited")
        with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
            breakers.close_by_hand(conn, "payments-api", actor="alice")
        # the page follows the run's changes live; a reload shows the second event too
        page.reload()
        expect(event.nth(1)).to_contain_text("payments-api let through by alice")
    finally:
        context.close()
