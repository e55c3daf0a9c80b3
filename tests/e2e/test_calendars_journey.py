"""An editor creates an exclusion calendar with a country's holidays and a blackout window
in a real browser and applies it to a schedule, then reads the week calendar and the load
forecast on their own clock. Every one of those pages passes axe-core (no serious or
critical violation) at 1280 and 390 px; screenshots go to /tmp/shots/w-cal."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.scheduling import calendars, schedules
from app.scheduling.calendars import CalendarSpec
from app.scheduling.schedule_spec import ScheduleSpec
from tests.helpers.axe import violations
from tests.helpers.browser import sign_in_page
from tests.helpers.people import make_user

SHOTS = Path("/tmp/shots/w-cal")


def add_schedules(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        for name, cron, zone in (
            ("weekday report", "0 9 * * 1-5", "Europe/Berlin"),
            ("pulse", "*/5 * * * *", "UTC"),
            ("hourly sync", "0 * * * *", "UTC"),
            ("invoices <b>", "30 7 * * *", "America/New_York"),
        ):
            schedules.create_schedule(conn, ScheduleSpec(name=name, cron=cron, timezone=zone,
                                                         handler="noop"))  # fmt: skip


def test_an_editor_makes_a_calendar_and_reads_the_week_and_the_forecast(
    live_server: str, db_url: str, browser: Any
) -> None:
    add_schedules(db_url)
    make_user(db_url, "editor", "editor")
    context = browser.new_context(timezone_id="Europe/Berlin")
    page = context.new_page()
    page.set_default_timeout(10_000)
    sign_in_page(page, live_server, "editor")
    page.get_by_role("link", name="Calendars").click()
    page.get_by_role("link", name="New calendar").click()
    page.get_by_label("Name").fill("Bavaria office")
    page.get_by_label("Public holidays of").select_option("DE")
    page.get_by_label("Region (optional)").fill("XX")
    page.get_by_role("button", name="Create calendar").click()
    assert "has no subdivision 'XX'" in page.locator("#subdivision-error").inner_text()
    page.get_by_label("Region (optional)").fill("by")
    page.get_by_role("button", name="Create calendar").click()
    page.wait_for_url(live_server + "/calendars/Bavaria%20office")
    assert page.get_by_text("Epiphany").first.is_visible()
    page.get_by_label("What it is").fill("quarter close")
    page.get_by_label("Starts").fill("2026-12-30T18:00")
    page.get_by_label("Ends").fill("2027-01-02T09:00")
    page.get_by_label("Time zone of these times").fill("Europe/Berlin")
    page.get_by_role("button", name="Add blackout window").click()
    page.locator("#windows tbody tr").first.wait_for()  # the page reloaded with it
    assert page.locator("#windows tbody tr").first.inner_text().startswith("quarter close")
    page.get_by_label("Apply to schedule").select_option("weekday report")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(live_server + "/calendars/Bavaria%20office#schedules")
    assert "weekday report" in page.locator("#schedules ul").inner_text()

    page.get_by_role("link", name="Week", exact=True).click()
    # the browser told the server its zone (a cookie) on the first page it loaded
    assert page.get_by_label("Times on the clock of").input_value() == "Europe/Berlin"
    assert page.locator(".band").first.is_visible()
    page.get_by_label("Schedule or job name contains").fill("invoices")
    page.wait_for_url("**q=invoices**")
    assert "pulse" not in page.locator("#week-grid").inner_text()
    assert "invoices <b>" in page.locator("#week-grid").inner_text()
    page.get_by_role("link", name="Forecast", exact=True).click()
    # pulse and hourly sync fire in any 24 hours; the daily and weekday ones only when their
    # next fire falls inside the window (not on a Saturday, nor just after their minute)
    assert re.search(r"\b[234] active schedules will fire", page.locator("main").inner_text())
    assert page.locator("svg.heatmap rect.l4").count() >= 1
    context.close()

    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = {
        "calendars": "/calendars",
        "calendar-new": "/calendars/new",
        "calendar-show": "/calendars/Bavaria%20office",
        "week": "/calendar?zone=Europe/Berlin",
        "forecast": "/forecast?zone=Europe/Berlin",
        "forecast-fragment": "/forecast/fragment?cron=0+9+*+*+1-5&timezone=Europe/Berlin"
        "&zone=Europe/Berlin",
    }
    problems: dict[str, list[str]] = {}
    for width in (1280, 390):
        # axe is injected as an inline script, which the pages' CSP rightly forbids
        context = browser.new_context(
            viewport={"width": width, "height": 900}, bypass_csp=True, timezone_id="Europe/Berlin"
        )
        page = context.new_page()
        page.set_default_timeout(10_000)
        sign_in_page(page, live_server, "editor")
        for name, path in pages.items():
            page.goto(live_server + path)
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            if name != "forecast-fragment":  # a fragment, not a page: no title, no landmarks
                found = violations(page)
                if found:
                    problems[f"{name}@{width}"] = found
        context.close()
    assert problems == {}


def test_the_signed_in_pages_link_the_week_the_forecast_and_the_calendars(
    live_server: str, db_url: str, signed_in: Callable[[str], Any]
) -> None:
    page = signed_in("viewer")
    for link, heading in (("Week", "Week of"), ("Forecast", "Load forecast"),
                          ("Calendars", "Exclusion calendars")):  # fmt: skip
        page.get_by_role("link", name=link, exact=True).click()
        assert page.get_by_role("heading", level=1).inner_text().startswith(heading)
    assert page.get_by_role("link", name="New calendar").count() == 0


GLUE_SHOTS = Path("/tmp/shots/glue")


def test_the_schedule_editor_names_a_calendar_crosses_out_its_fires_and_shows_the_load(
    live_server: str, db_url: str, browser: Any
) -> None:
    add_schedules(db_url)
    make_user(db_url, "editor", "editor")
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        calendars.create(conn, CalendarSpec(name="Germany", country="DE"), actor="test")
    GLUE_SHOTS.mkdir(parents=True, exist_ok=True)
    problems: dict[int, list[str]] = {}
    for width in (1280, 390):
        # axe is injected as an inline script, which the pages' CSP rightly forbids
        context = browser.new_context(
            viewport={"width": width, "height": 900}, bypass_csp=True, timezone_id="Europe/Berlin"
        )
        page = context.new_page()
        page.set_default_timeout(10_000)
        sign_in_page(page, live_server, "editor")
        page.goto(live_server + "/schedules/new")
        page.get_by_label("How often").select_option("custom")
        page.get_by_label("Cron expression").fill("0 12 25 12 *")
        page.get_by_label("Exclusion calendar").select_option("Germany")
        crossed = page.locator("#schedule-preview tr.excluded")
        crossed.nth(9).wait_for()  # the preview crossed out every one of the ten fires
        assert crossed.count() == 10
        assert "public holiday in DE: Christmas Day" in crossed.first.inner_text()
        page.locator("#load-forecast svg.heatmap").wait_for()
        page.screenshot(path=str(GLUE_SHOTS / f"schedule-new-{width}.png"), full_page=True)
        found = violations(page)
        if found:
            problems[width] = found
        context.close()
    assert problems == {}
