"""An editor signs in and creates a job in a real browser; the audit log shows it.
Every page passes axe-core with no serious or critical violation; screenshots at 1280
and 390 px go to /tmp/shots for a person to look at."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleSpec
from tests.helpers.axe import SHOTS, violations
from tests.helpers.browser import sign_in_page
from tests.helpers.people import make_user


def test_an_editor_signs_in_and_creates_a_job(
    live_server: str, db_url: str, signed_in: Callable[[str], Any]
) -> None:
    page = signed_in("editor")
    page.get_by_role("link", name="Jobs").click()
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Name").fill("nightly report")
    # picking a handler swaps its argument fields in: type only once the swap is over
    with page.expect_response(lambda r: "/jobs/args-fields" in r.url):
        page.get_by_label("Handler").select_option("sleep")
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )
    page.get_by_label("Arguments (JSON object)").fill("{oops")
    page.get_by_role("button", name="Create job").click()
    # htmx swapped the form with the error next to the field; nothing was saved
    assert "args are not valid JSON" in page.locator("#args-error").inner_text()
    page.get_by_label("Arguments (JSON object)").fill('{"seconds": 1}')
    page.get_by_role("button", name="Create job").click()
    page.wait_for_url(live_server + "/jobs/nightly%20report")
    assert page.get_by_role("heading", name="Job nightly report").is_visible()
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT handler, args FROM job_definitions").fetchone()
    assert row == ("sleep", {"seconds": 1})
    page.get_by_role("link", name="Audit log").click()
    assert page.locator("#audit-table tbody tr").first.inner_text().count("job.create") == 1


def test_every_page_passes_axe_and_is_photographed(
    live_server: str, db_url: str, browser: Any
) -> None:
    make_user(db_url, "admin", "admin")
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(
            "INSERT INTO job_definitions (id, name, handler, args) VALUES "
            "(gen_random_uuid(), 'nightly <b>report</b>', 'sleep', '{\"seconds\": 5}')"
        )
        schedules.create_schedule(
            conn, ScheduleSpec(name="weekdays", cron="0 9 * * 1-5", timezone="Europe/Berlin",
                               job="nightly <b>report</b>"),
        )  # fmt: skip
        schedules.pause(conn, "weekdays", note="quarter close")
    SHOTS.mkdir(exist_ok=True)
    pages = {
        "login": "/login",
        "home": "/",
        "jobs": "/jobs",
        "job-new": "/jobs/new",
        "job-show": "/jobs/nightly%20%3Cb%3Ereport%3C%2Fb%3E",
        "audit": "/audit",
        "schedules": "/schedules",
    }
    problems: dict[str, list[str]] = {}
    for width in (1280, 390):
        # axe is injected as an inline script, which the pages' CSP rightly forbids
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        page = context.new_page()
        page.set_default_timeout(10_000)
        for name, path in pages.items():
            if name == "home":
                sign_in_page(page, live_server, "admin")
            page.goto(live_server + path)
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            found = violations(page)
            if found:
                problems[f"{name}@{width}"] = found
        context.close()
    assert problems == {}
