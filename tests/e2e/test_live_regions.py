"""A live region never stays behind: a change heard while the region's refresh is in flight
(a slow answer on a busy server) is shown once that refresh has landed, whether htmx queued
it (a run's page) or a throttle dropped it (the dead letters), and a change heard with
nothing in flight is fetched once. Against a real `sundial web`; the browser holds the
region's first answer back until the second change has been heard, as a slow server
would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.runs import transitions
from tests.helpers.browser import sign_in_page
from tests.helpers.commands import free_port
from tests.helpers.dead_letters import dead_letter, declined
from tests.helpers.live import Start, listener_count, start_web, submit
from tests.helpers.people import make_user
from tests.helpers.processes import services
from tests.helpers.waits import wait_until

# Counts the live-update messages heard, the swaps done and the paths asked for, from before
# the page's scripts.
COUNTERS = """
window.heard = 0; window.swapped = 0;
document.addEventListener("htmx:sseMessage", () => { window.heard += 1; });
window.asked = [];
document.addEventListener("htmx:afterSettle", () => { window.swapped += 1; });
document.addEventListener("htmx:beforeRequest", (e) => {
  window.asked.push(e.detail.requestConfig.path);
});
"""


@pytest.fixture
def start(db_url: str, tmp_path: Path) -> Iterator[Start]:
    with services(db_url, tmp_path) as start_service:
        yield start_service


def _conn(db_url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(db_url, autocommit=True, row_factory=dict_row)


def _wait_for(page: Any, condition: str, what: str, also: Any = lambda: True) -> None:
    """Until `condition` holds in the page (the page's policy forbids wait_for_function's
    eval); waiting through the page lets its routes be handled meanwhile."""

    def holds() -> bool:
        page.wait_for_timeout(50)
        return bool(page.evaluate(condition)) and bool(also())

    wait_until(holds, what)


def test_a_change_heard_while_the_region_refreshes_is_shown_after_it(
    start: Start, db_url: str, page: Any
) -> None:
    _, base = start_web(start, free_port())
    make_user(db_url, "oncall", "operator")
    sign_in_page(page, base, "oncall")
    wait_until(lambda: listener_count(db_url) == 1, "the web process to LISTEN")
    run_id = submit(db_url, "sleep", seconds=60)  # no worker: it stays pending
    page.add_init_script(COUNTERS)
    page.goto(f"{base}/runs/{run_id}")
    badge = page.locator("h1 .badge")
    expect(badge).to_have_text("pending")
    # A page that connects refreshes once at once: let that settle first.
    _wait_for(page, "window.heard >= 1 && window.swapped >= 1", "the first refresh")
    heard = page.evaluate("window.heard")

    held: list[tuple[Any, Any]] = []

    def hold_the_first_answer(route: Any) -> None:
        if route.request.headers.get("hx-request") and not held:
            held.append((route, route.fetch()))  # answered now, delivered later
        else:
            route.continue_()

    page.route(f"{base}/runs/{run_id}", hold_the_first_answer)
    with _conn(db_url) as conn:
        assert transitions.cancel(conn, run_id) == "cancelled"
    _wait_for(page, "true", "the region to ask for the change", lambda: bool(held))
    with _conn(db_url) as conn:
        assert transitions.retry(conn, run_id) is not None  # pending again
    _wait_for(page, f"window.heard >= {heard + 2}", "the second change heard while held")

    route, answer = held[0]
    route.fulfill(response=answer)
    expect(badge).to_have_text("pending", timeout=10_000)
    assert page.evaluate("window.swapped") >= 3, "shown by a refresh, not the first answer"

    # A change heard with nothing in flight is fetched once, not twice.
    asked = f"window.asked.filter(p => p === '/runs/{run_id}').length"
    before = page.evaluate(asked)
    with _conn(db_url) as conn:
        assert transitions.cancel(conn, run_id) == "cancelled"
    expect(badge).to_have_text("cancelled", timeout=10_000)
    page.wait_for_timeout(1_500)
    assert page.evaluate(asked) == before + 1


def test_a_change_a_throttled_region_dropped_while_refreshing_is_shown_after_it(
    start: Start, db_url: str, page: Any
) -> None:
    _, base = start_web(start, free_port())
    make_user(db_url, "oncall", "operator")
    sign_in_page(page, base, "oncall")
    wait_until(lambda: listener_count(db_url) == 1, "the web process to LISTEN")
    page.add_init_script(COUNTERS)
    page.goto(f"{base}/dead-letters")  # refreshed at most every 5 s
    _wait_for(page, "window.heard >= 1 && window.swapped >= 1", "the first refresh")
    heard = page.evaluate("window.heard")
    groups = page.locator("#dead-letter-groups tbody tr")

    held: list[tuple[Any, Any]] = []

    def hold_the_first_answer(route: Any) -> None:
        if route.request.headers.get("hx-request") and not held:
            held.append((route, route.fetch()))
        else:
            route.continue_()

    page.route(f"{base}/dead-letters", hold_the_first_answer)
    with _conn(db_url) as conn:
        declined(conn, 1)
    _wait_for(page, "true", "the region to ask for the change", lambda: bool(held))
    with _conn(db_url) as conn:
        dead_letter(conn, "KeyError: 'customer'")  # a second group
    _wait_for(page, f"window.heard >= {heard + 2}", "the second change heard while held")

    route, answer = held[0]
    route.fulfill(response=answer)
    expect(groups).to_have_count(2, timeout=10_000)
