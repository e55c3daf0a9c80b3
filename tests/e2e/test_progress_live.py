"""A running job's progress appears live on its run page, and a snoozed run says until when
and why: real `sundial web` and `sundial worker` processes, a real browser. The page fits
1280 and 390 px, passes axe-core, and its screenshots go to /tmp/shots/snooze."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.helpers.browser import look_at_both_widths
from tests.helpers.live import Start, sign_in_live, submit

SHOTS = Path("/tmp/shots/snooze")
# The first elements reaching past the page's right edge, to name in a failure.


def _look(page: Any, name: str) -> None:
    look_at_both_widths(page, SHOTS, name)


def test_progress_appears_live_and_a_snooze_says_why(
    start: Start, db_url: str, page: Any, tmp_path: Path
) -> None:
    start("worker")
    base = sign_in_live(start, db_url, page, "viewer")

    go_on = tmp_path / "go-on"
    run_id = submit(db_url, "report_progress", go_on=str(go_on))
    page.goto(f"{base}/runs/{run_id}")
    page.evaluate("window.notReloaded = true")
    progress = page.locator("#run-progress")
    expect(progress).to_contain_text("50%", timeout=15_000)
    expect(progress).to_contain_text("step 200 of 200")
    expect(progress.locator("progress")).to_have_attribute("value", "50.0")
    _look(page, "progress")
    go_on.touch()
    expect(page.locator("h1 .badge")).to_have_text("completed", timeout=15_000)
    expect(progress).to_contain_text("100% — done")
    assert page.evaluate("window.notReloaded === true"), "the page was reloaded"

    snoozed_id = submit(db_url, "snooze_first", seconds=3600,
                        reason="the partner's nightly export is not there yet")  # fmt: skip
    page.goto(f"{base}/runs/{snoozed_id}")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#run-snoozed")).to_contain_text(
        "the partner's nightly export is not there yet", timeout=15_000
    )
    expect(page.locator("#run-snoozed")).to_contain_text("Snoozed until")
    expect(page.locator("h1 .badge")).to_have_text("snoozed")
    expect(page.locator("#attempt-1")).to_contain_text("Snoozed, put back for later")
    assert page.evaluate("window.notReloaded === true"), "the page was reloaded"
    _look(page, "snoozed")
