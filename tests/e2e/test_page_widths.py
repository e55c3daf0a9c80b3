"""Every page people watch fits its width, from a small phone to a desktop: the page itself
never scrolls sideways (a wide table scrolls inside its own box). At 1280 and 390 px each
also passes axe-core, and its screenshot goes to /tmp/shots/widths for a person to look at."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.catalog import job_definitions
from app.catalog.job_definitions import JobSpec
from app.notify import channels, rules
from app.people import audit
from app.runs import submission
from app.runs.run_inserts import NewRun
from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleSpec
from tests.helpers.axe import violations_with_axe
from tests.helpers.browser import sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import finish_run
from tests.helpers.waits import db_now

SHOTS = Path("/tmp/shots/widths")
WIDTHS = (320, 390, 768, 1024, 1280)
LONG = "a-rather-long-name-without-any-space-" * 3
PAGES = ("/", "/audit", "/slo", "/runs", "/schedules", "/dead-letters", "/workers", "/jobs",
         "/queues", f"/jobs/{LONG[:120]}/run", "/notifications")  # fmt: skip


def seed(db_url: str) -> None:
    """Long names and values where they show, a schedule with late fires, runs of all kinds."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        job_definitions.create(
            conn, JobSpec(name=LONG[:120], handler="noop", args={"to": LONG}), actor="t"
        )
        schedules.create_schedule(
            conn, ScheduleSpec(name=LONG[:100], every_seconds=60, job=LONG[:120]), actor="t"
        )
        audit.record(conn, "t", "job.update", "job", LONG[:120], before={"a": LONG},
                     after={"a": LONG * 2})  # fmt: skip
        for n in range(5):
            run_id = submission.submit(conn, NewRun("noop", {"n": n, "note": LONG})).id
            finish_run(conn, run_id)
        submission.submit(conn, NewRun("noop", run_at=db_now(conn) - timedelta(minutes=5)))
        address = {"url": f"https://{LONG[:60]}.example.com/{LONG}"}
        hook = channels.create(conn, "k", name=LONG[:100], kind="webhook", fields=address,
                               actor="t")  # fmt: skip
        rules.create(conn, channel_id=hook.id, event="dead_letter", job=LONG[:120], actor="t")


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_fit_their_width(live_server: str, db_url: str, browser: Any, width: int) -> None:
    seed(db_url)
    make_user(db_url, "admin", "admin")
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        sign_in_page(page, live_server, "admin")
        too_wide, violations = {}, {}
        for path in PAGES:
            page.goto(live_server + path)
            page.wait_for_load_state("networkidle")
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            if overflow > 1:
                too_wide[path] = overflow
            if width in (390, 1280):
                SHOTS.mkdir(parents=True, exist_ok=True)
                name = path.strip("/").replace("/", "-")[:40] or "overview"
                page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
                if found := violations_with_axe(page):
                    violations[path] = found
        assert too_wide == {}, f"pages wider than {width} px, by px: {too_wide}"
        assert violations == {}
    finally:
        context.close()
