"""With more jobs than a list can hold, an editor finds one by typing part of its name in a
real browser: the field's suggestions follow the typing, the schedule is saved with the
job picked, and a workflow step finds its job the same way. The page passes axe-core;
screenshots at 1280 and 390 px go to /tmp/shots/job-picker for a person to look at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from app.catalog.job_definitions import PICK_FROM_LIST
from tests.helpers.axe import violations
from tests.helpers.browser import sign_in_page
from tests.helpers.job_picker import many_jobs
from tests.helpers.people import make_user
from tests.helpers.waits import wait_until

SHOTS = Path("/tmp/shots/job-picker")


def options(page: Any, datalist: str) -> list[str]:
    values: list[str] = page.eval_on_selector_all(
        f"#{datalist} option", "nodes => nodes.map(n => n.value)"
    )
    return values


def test_an_editor_finds_a_job_among_hundreds_by_typing(
    live_server: str, db_url: str, browser: Any
) -> None:
    context = browser.new_context(bypass_csp=True)  # for the axe-core script only
    page = context.new_page()
    page.set_default_timeout(10_000)
    with psycopg.connect(db_url, autocommit=True) as conn:
        many_jobs(conn, PICK_FROM_LIST + 50)
    make_user(db_url, "editor", "editor")
    sign_in_page(page, live_server, "editor")
    page.goto(live_server + "/schedules/new")
    page.get_by_label("Name", exact=True).fill("nightly 42")
    job = page.get_by_label("Job", exact=True)
    job.press_sequentially("0042")
    wait_until(lambda: options(page, "job-names") == ["job-0042"], "suggestions for 0042")
    job.fill("")
    job.press_sequentially("job-01")
    wait_until(lambda: len(options(page, "job-names")) == 20, "the first twenty suggestions")
    assert options(page, "job-names")[0] == "job-0100"
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SHOTS / f"schedule-new-{width}.png"), full_page=True)
    assert violations(page) == []
    job.fill("job-0042")
    page.get_by_label("How often").select_option("weekdays")
    page.get_by_role("button", name="Create schedule").click()
    page.wait_for_url(live_server + "/schedules/nightly%2042?done=created")
    assert "job-0042" in page.locator(".facts").inner_text()

    page.goto(live_server + "/workflows/new")
    step_job = page.locator("#step-0-job")
    step_job.press_sequentially("0007")
    wait_until(lambda: options(page, "step-0-job-names") == ["job-0007"], "step suggestions")
    page.set_viewport_size({"width": 390, "height": 900})
    page.screenshot(path=str(SHOTS / "workflow-new-390.png"), full_page=True)
    context.close()
