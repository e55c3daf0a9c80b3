"""An editor picks a handler that declares its arguments: htmx swaps in a field per
argument, a bad value is refused next to its field, the job is saved with typed args.
axe-core finds nothing serious; screenshots at 1280 and 390 px go to /tmp/shots/h-args."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Json

from tests.helpers.axe import violations
from tests.helpers.browser import sign_in_page
from tests.helpers.people import make_user
from tests.helpers.worker_handlers import ReportArgs

SCHEMA = {
    **ReportArgs.model_json_schema(),
    "properties": {
        **ReportArgs.model_json_schema()["properties"],
        "urgent": {"type": "boolean", "description": "Send it <b>now</b>"},
        "tone": {"enum": ["plain", "loud"], "description": "How the report reads"},
    },
}


def test_an_editor_fills_the_fields_of_a_declared_handler(
    live_server: str, db_url: str, browser: Any
) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO workers (id, host, pid, concurrency, handlers, handler_args) "
            "VALUES ('w1', 'h', 1, 1, '[\"send_report_args\"]', %s)",
            (Json({"send_report_args": SCHEMA}),),
        )
    make_user(db_url, "editor", "editor")
    # axe is injected as an inline script, which the pages' CSP rightly forbids
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(10_000)
    sign_in_page(page, live_server, "editor")
    page.goto(live_server + "/jobs/new")
    page.get_by_label("Name").fill("weekly report")
    page.get_by_label("Handler").select_option("send_report_args")
    email = page.get_by_label("Email (required)")
    email.wait_for()  # htmx swapped the fields in for the JSON editor
    assert page.get_by_label("Arguments (JSON object)").count() == 0
    assert page.get_by_text("Who gets the report").is_visible()
    assert page.get_by_text("Send it <b>now</b>").is_visible()  # text, not markup
    assert page.get_by_label("Retries", exact=True).first.input_value() in ("3", "2")

    email.fill("ops@example.com")
    page.locator("#arg-2").fill("4")
    page.get_by_label("Urgent").check()
    page.get_by_label("Tone").select_option("loud")
    shots = Path("/tmp/shots/h-args")
    shots.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(shots / f"job-args-{width}.png"), full_page=True)
    assert violations(page) == []
    page.get_by_role("button", name="Create job").click()
    page.wait_for_url(live_server + "/jobs/weekly%20report")
    assert page.get_by_role("heading", name="Job weekly report").is_visible()
    assert page.get_by_label("Email (required)").input_value() == "ops@example.com"
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT handler, args FROM job_definitions").fetchone()
    assert row == (
        "send_report_args",
        {"email": "ops@example.com", "retries": 4, "urgent": True, "tone": "loud"},
    )
    context.close()
