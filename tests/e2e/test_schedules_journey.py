"""The schedule owner's journey in a real browser against a real `sundial web` and a real
worker: an editor creates a job, then a weekday 09:00 Berlin schedule from a preset
without typing cron, watches the preview, saves, pauses, resumes, runs it now (a worker
completes the run), finds each step in the audit log and the manual fire in the ledger,
edits the rule and rolls it back. Every schedule page passes axe-core; screenshots at 1280
and 390 px go to /tmp/shots/w-sched for a person to look at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleSpec
from tests.helpers.axe import violations
from tests.helpers.browser import sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import services
from tests.helpers.waits import wait_until

SHOTS = Path("/tmp/shots/w-sched")


@pytest.fixture
def berlin_viewer(browser: Any) -> Iterator[Any]:
    """A page whose browser lives in New York, so "your time" differs from Berlin's."""
    context = browser.new_context(timezone_id="America/New_York")
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def _one(db_url: str, sql: str) -> Any:
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        return conn.execute(sql).fetchone()


def test_an_editor_schedules_a_job_pauses_runs_it_and_rolls_back_an_edit(
    live_server: str, db_url: str, tmp_path: Path, berlin_viewer: Any
) -> None:
    page = berlin_viewer
    make_user(db_url, "editor", "editor")
    sign_in_page(page, live_server, "editor")
    page.goto(live_server + "/jobs/new")
    page.get_by_label("Name").fill("send report")
    page.get_by_label("Handler").select_option("noop")
    page.get_by_role("button", name="Create job").click()
    page.wait_for_url(live_server + "/jobs/send%20report")

    page.goto(live_server + "/schedules")
    page.get_by_role("link", name="New schedule").click()
    # the five actions: name, job, preset, zone, save — no cron typed
    page.get_by_label("Name", exact=True).fill("weekday report")
    page.get_by_label("Job", exact=True).select_option("send report")
    page.get_by_label("How often").select_option("weekdays")
    preview = page.locator("#schedule-preview")
    # the zone starts at the browser's own, and a city name finds its zone
    assert page.get_by_label("Time zone").input_value() == "America/New_York"
    page.get_by_label("Time zone").fill("tokyo")
    wait_until(lambda: "Asia/Tokyo time" in preview.inner_text(), "a zone found by its city")
    page.get_by_label("Time zone").fill("Europe/Berl")
    wait_until(lambda: "unknown time zone 'Europe/Berl'" in preview.inner_text(),
               "the preview to follow typing")  # fmt: skip
    page.get_by_label("Time zone").fill("Europe/Berlin")
    wait_until(lambda: "Europe/Berlin time" in preview.inner_text(), "the preview to update")
    sentence = page.locator("#preview-sentence")
    assert "At 09:00, Monday through Friday" in sentence.inner_text()
    assert page.locator("#preview-cron").inner_text() == "0 9 * * 1-5"
    fires = page.locator("#schedule-preview tbody tr")
    assert fires.count() == 10
    first = fires.first.inner_text()
    assert "09:00 CET" in first or "09:00 CEST" in first
    assert "EST" in first or "EDT" in first  # the viewer's zone, from the browser
    page.get_by_role("button", name="Create schedule").click()
    page.wait_for_url(live_server + "/schedules/weekday%20report?done=created")
    assert "At 09:00, Monday through Friday" in page.locator(".facts").inner_text()

    page.get_by_label("Why (shown to everyone)").fill("quarter close")
    page.get_by_role("button", name="Pause").click()
    page.wait_for_url("**/schedules/weekday%20report?done=paused")
    assert "paused: quarter close" in page.locator("#schedule-state").inner_text()
    page.get_by_role("button", name="Resume").click()
    page.wait_for_url("**?done=resumed")
    assert page.locator("#schedule-state").inner_text() == "active"

    with services(db_url, tmp_path) as start:
        worker = start("worker")
        worker.wait_for_log("worker started", timeout=60)
        page.get_by_role("button", name="Run now").click()
        page.wait_for_url("**?done=ran&run=*")
        run = _one(db_url, "SELECT id FROM job_runs")
        opened = page.get_by_role("link", name=f"Open run {run['id']}")
        assert opened.get_attribute("href") == f"/runs/{run['id']}"
        wait_until(
            lambda: _one(db_url, "SELECT status FROM job_runs")["status"] == "completed",
            "the worker to complete the run",
            service=worker,
        )
        # the page follows the run by itself, without a reload
        expect(page.locator("#last-run")).to_contain_text("completed", timeout=15_000)
    last_run = page.locator("#last-run").inner_text()
    assert "completed" in last_run and f"run {run['id']}" in last_run

    page.get_by_role("link", name="Every time it was due and what happened").click()
    ledger = page.locator("#fires-table tbody tr").first.inner_text()
    assert "run now" in ledger and "ran" in ledger and f"run {run['id']}" in ledger

    page.get_by_role("link", name="Audit log").click()
    audit = page.locator("#audit-table").inner_text()
    for step in ("schedule.create", "schedule.pause", "schedule.resume", "schedule.run_now"):
        assert step in audit, step

    page.goto(live_server + "/schedules/weekday%20report/edit")
    page.get_by_label("How often").select_option("daily")
    page.get_by_label("At (hours:minutes)").fill("07:30")
    wait_until(lambda: "At 07:30" in preview.inner_text(), "the preview of the edit")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url("**?done=saved")
    assert _one(db_url, "SELECT cron FROM schedules")["cron"] == "30 7 * * *"
    page.get_by_role("link", name="Versions and changes").click()
    page.wait_for_url("**/history")
    # the diff of the edit marks what it removed
    expect(page.locator("del").first).to_be_attached()
    page.get_by_role("button", name="Roll back to version 1").click()
    page.wait_for_url("**?done=rolled-back")
    assert _one(db_url, "SELECT cron FROM schedules")["cron"] == "0 9 * * 1-5"
    assert "At 09:00, Monday through Friday" in page.locator(".facts").inner_text()
    page.goto(live_server + "/audit?action=schedule.rollback")
    assert "schedule.rollback" in page.locator("#audit-table tbody").inner_text()


def test_every_schedule_page_passes_axe_and_is_photographed(
    live_server: str, db_url: str, browser: Any
) -> None:
    make_user(db_url, "admin", "admin")
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        schedules.create_schedule(
            conn, ScheduleSpec(name="night <b>run</b>", cron="30 2 * * *", timezone="Europe/Berlin",
                               handler="noop"),
        )  # fmt: skip
        schedules.update_schedule(conn, "night <b>run</b>", {"cron": "0 3 * * *"}, actor="alice")
        schedules.run_now(conn, "night <b>run</b>")
        schedules.pause(conn, "night <b>run</b>", note="quarter close")
    SHOTS.mkdir(parents=True, exist_ok=True)
    base = "/schedules/night%20%3Cb%3Erun%3C%2Fb%3E"
    pages = {"schedules": "/schedules", "schedule-new": "/schedules/new", "schedule": base,
             "schedule-edit": base + "/edit", "schedule-fires": base + "/fires",
             "schedule-history": base + "/history"}  # fmt: skip
    problems: dict[str, list[str]] = {}
    for width in (1280, 390):
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        page = context.new_page()
        page.set_default_timeout(10_000)
        sign_in_page(page, live_server, "admin")
        for name, path in pages.items():
            page.goto(live_server + path)
            if name in ("schedule-new", "schedule-edit"):
                page.locator("#schedule-preview table, #schedule-preview .flash").first.wait_for()
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            found = violations(page)
            if found:
                problems[f"{name}@{width}"] = found
        context.close()
    assert problems == {}
