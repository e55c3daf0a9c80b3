"""An operator opens the Queues page in a real browser, sees the depth of each queue, pauses
one with a reason while a real worker serves it (its runs then wait, the other queue's run),
and resumes it (its runs then run). The page passes axe-core at 1280 and 390 px;
screenshots go to /tmp/shots/queues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from app.runs.run_inserts import NewRun
from tests.helpers.browser import look_at_both_widths, sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import services
from tests.helpers.waits import wait_until
from tests.helpers.workers import status_of, submit

SHOTS = Path("/tmp/shots/queues")


def _check(page: Any, name: str) -> None:
    look_at_both_widths(page, SHOTS, name)


def test_an_operator_pauses_and_resumes_a_queue_while_a_worker_serves_it(
    live_server: str, db_url: str, browser: Any, tmp_path: Path
) -> None:
    make_user(db_url, "ops", "operator")
    reports = submit(db_url, *[NewRun("noop", queue="reports")] * 3)
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in_page(page, live_server, "ops")
        page.get_by_role("link", name="Queues").click()
        page.wait_for_url("**/queues")
        row = page.locator('tr[data-queue="reports"]')
        expect(row).to_contain_text("3")
        _check(page, "waiting")

        note = row.get_by_label("Why pause reports? (optional)")
        note.fill("the warehouse is moving")
        # a run arrives meanwhile: the table refreshes itself, and what was typed stays
        reports += submit(db_url, NewRun("noop", queue="reports"))
        expect(row.locator('td[data-label="Waiting"]')).to_contain_text("4")
        expect(note).to_have_value("the warehouse is moving")
        row.get_by_role("button", name="Pause reports").click()
        page.wait_for_url("**done=paused**")
        expect(page.get_by_role("status")).to_contain_text("Queue paused")
        expect(row).to_contain_text("Paused by ops")
        expect(row).to_contain_text("the warehouse is moving")
        _check(page, "paused")

        with services(db_url, tmp_path) as start:
            worker = start("worker", "--queues", "default=2,reports=2")
            worker.wait_for_log("worker started: queue reports")
            (other,) = submit(db_url, NewRun("noop"))
            wait_until(lambda: status_of(db_url, other) == "completed", "the default run")
            assert {status_of(db_url, i) for i in reports} == {"pending"}

            row.get_by_role("button", name="Resume reports").click()
            page.wait_for_url("**done=resumed**")
            expect(row).to_contain_text("Open")
            wait_until(
                lambda: {status_of(db_url, i) for i in reports} == {"completed"},
                "the resumed queue's runs",
                service=worker,
            )
            # the page follows by itself: nothing waits in reports any more
            expect(row.locator('td[data-label="Waiting"]')).to_have_text("0", timeout=15_000)
        _check(page, "resumed")
    finally:
        context.close()


def test_an_operator_limits_a_queue_per_customer_from_the_page(
    live_server: str, db_url: str, browser: Any
) -> None:
    make_user(db_url, "ops", "operator")
    submit(db_url, *[NewRun("noop", {"customer_id": "acme"}, queue="partner")] * 2)
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in_page(page, live_server, "ops")
        page.goto(f"{live_server}/queues")
        row = page.locator('tr[data-queue="partner"]')
        expect(row.locator(".queue-limits")).to_contain_text("No limits")
        row.get_by_role("link", name="Change limits of partner").click()
        page.wait_for_url("**/queues/partner/limits")
        _check(page, "limits-form")

        page.get_by_label("Key: the input field that names it").fill("customer_id")
        page.get_by_role("button", name="Save limits").click()
        error = page.locator("#key_max_running-error")
        expect(error).to_contain_text("a limit per key needs both")
        expect(page.get_by_label("At most, for each key")).to_have_attribute("aria-invalid", "true")
        expect(page.get_by_label("Key: the input field that names it")).to_have_value("customer_id")
        _check(page, "limits-refused")

        page.get_by_label("At most, for each key").fill("1")
        page.get_by_label("At most this many of its runs at once").fill("10")
        page.get_by_label("Starts", exact=True).fill("20")
        page.get_by_label("Every (seconds)").fill("1")
        page.get_by_label("Take turns between keys (the input field above)").check()
        page.get_by_label("Keys with a bigger share (optional)").fill("acme = 3")
        page.get_by_role("button", name="Save limits").click()
        page.wait_for_url("**done=limited**")
        expect(page.get_by_role("status")).to_contain_text("Limits saved")
        limits = page.locator('tr[data-queue="partner"] .queue-limits')
        expect(limits).to_contain_text("At most 10 at once")
        expect(limits).to_contain_text("At most 1 at once per customer_id")
        expect(limits).to_contain_text("At most 20 starts every 1 s")
        expect(limits).to_contain_text("Fair turns per customer_id (acme 3 a turn)")
        expect(limits).to_contain_text("Set by ops")
        _check(page, "limited")
    finally:
        context.close()


def test_an_operator_pauses_a_failing_service_and_lets_its_runs_through(
    live_server: str, db_url: str, browser: Any
) -> None:
    import psycopg
    from psycopg.rows import dict_row

    from app.catalog import job_definitions
    from app.catalog.job_fields import JobSpec

    make_user(db_url, "ops", "operator")
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        spec = JobSpec.model_construct(name="charge", handler="noop",
                                       dependencies=["payments-api", "ledger"])  # fmt: skip
        job_definitions.create(conn, spec, actor="test")
        # ledger failed on its own: its breaker opened and waits out its cool-off
        conn.execute(
            "UPDATE dependencies SET state = 'open', reopen_at = now() + interval '1 hour',"
            " note = '5 of its last 5 calls failed', changed_by = 'sundial'"
            " WHERE name = 'ledger'"
        )
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in_page(page, live_server, "ops")
        expect(page.locator(".alert-list")).to_contain_text("ledger is failing")
        page.goto(f"{live_server}/queues#services")
        payments = page.locator('li[data-service="payments-api"]')
        expect(payments).to_contain_text("Working")
        expect(page.locator('li[data-service="ledger"]')).to_contain_text(
            "Paused after failures (5 of its last 5 calls failed)"
        )
        _check(page, "services")

        payments.get_by_label("Why pause the runs that call payments-api? (optional)").fill(
            "their maintenance window"
        )
        payments.get_by_role("button", name="Pause runs that call payments-api").click()
        page.wait_for_url("**done=service_paused**")
        expect(payments).to_contain_text("Paused by ops: their maintenance window")
        _check(page, "service-paused")

        payments.get_by_role("button", name="Let runs that call payments-api through").click()
        page.wait_for_url("**done=service_resumed**")
        expect(payments).to_contain_text("Working")

        page.get_by_role("link", name="Settings of payments-api").click()
        page.wait_for_url("**/breakers/payments-api")
        page.get_by_label("Then let this many trial runs go").fill("0")
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#probes-error")).to_contain_text("between 1 and 1,000")
        _check(page, "service-settings-refused")
        page.get_by_label("Then let this many trial runs go").fill("2")
        page.get_by_role("button", name="Save settings").click()
        page.wait_for_url("**done=service_settings**")
        expect(page.get_by_role("status")).to_contain_text("Settings saved")
    finally:
        context.close()
