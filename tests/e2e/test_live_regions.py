"""A live region never stays behind: a change heard while the region's refresh is in flight
(a slow answer on a busy server) is shown once that refresh has landed, whether htmx queued
it (a run's page) or a throttle dropped it (the dead letters), and a change heard with
nothing in flight is fetched once. Against a real `sundial web`; the browser holds the
region's first answer back until the second change has been heard, as a slow server
would. Each step leaves the region in a state of its own, so only a refresh after the held
answer can show the last one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from tests.helpers.dead_letters import dead_letter, declined
from tests.helpers.live import Start, sign_in_live
from tests.helpers.waits import wait_until

# From before the page's scripts: the live updates each region heard, the swaps that settled
# in it and the requests it made, by the region's id.
COUNTERS = """
window.heard = {}; window.settled = {}; window.asked = {};
const count = (tally, elt) => { tally[elt.id] = (tally[elt.id] || 0) + 1; };
document.addEventListener("htmx:sseMessage", (e) => count(window.heard, e.target));
document.addEventListener("htmx:afterSettle", (e) => count(window.settled, e.target));
document.addEventListener("htmx:beforeRequest", (e) => count(window.asked, e.detail.elt));
"""


def _conn(db_url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(db_url, autocommit=True, row_factory=dict_row)


def _tally(page: Any, name: str, region: str) -> int:
    return int(page.evaluate(f"window.{name}['{region}'] || 0"))


def _wait_for(page: Any, holds: Callable[[], bool], what: str) -> None:
    """Until `holds` (the page's policy forbids wait_for_function's eval); waiting through
    the page lets its routes be handled meanwhile."""

    def waited() -> bool:
        page.wait_for_timeout(50)
        return holds()

    wait_until(waited, what)


def _open_settled(page: Any, url: str, region: str) -> None:
    """Open `url` and wait out the refresh a page makes as it connects."""
    page.add_init_script(COUNTERS)
    page.goto(url)
    _wait_for(
        page,
        lambda: _tally(page, "heard", region) >= 1 and _tally(page, "settled", region) >= 1,
        "the first refresh",
    )


def _held_then_released(
    page: Any, url: str, region: str, first: Callable[[], Any], second: Callable[[], Any]
) -> None:
    """Make the `first` change, hold the region's answer to it, make the `second` change,
    and release the answer once the region has heard it."""
    held: list[tuple[Any, Any]] = []

    def hold_the_first_answer(route: Any) -> None:
        if route.request.headers.get("hx-request") and not held:
            held.append((route, route.fetch()))  # answered now, delivered later
        else:
            route.continue_()

    heard = _tally(page, "heard", region)
    page.route(url, hold_the_first_answer)
    first()
    _wait_for(page, lambda: bool(held), "the region to ask for the first change")
    second()
    _wait_for(page, lambda: _tally(page, "heard", region) >= heard + 2, "the second change")
    route, answer = held[0]
    route.fulfill(response=answer)


def test_a_change_heard_while_the_region_refreshes_is_shown_after_it(
    start: Start, db_url: str, page: Any
) -> None:
    base = sign_in_live(start, db_url, page)
    with _conn(db_url) as conn:  # no worker: it waits until this test moves it
        run_id = submission.submit(conn, NewRun("sleep", {"seconds": 60}, max_retries=0)).id
    url = f"{base}/runs/{run_id}"
    _open_settled(page, url, "run-detail")
    badge = page.locator("h1 .badge")
    expect(badge).to_have_text("pending")
    claimed: list[Any] = []

    def claim() -> None:
        with _conn(db_url) as conn:
            claimed.extend(transitions.claim(conn, "w", 1, 30))

    def fail() -> None:
        outcome = Outcome(OutcomeStatus.FAILED, error="no", retryable=False)
        with _conn(db_url) as conn:
            transitions.finish_many(conn, "w", [transitions.Finish(run_id, 1, outcome)])

    _held_then_released(page, url, "run-detail", claim, fail)  # the held answer: running
    expect(badge).to_have_text("failed", timeout=10_000)
    assert [r.run_id for r in claimed] == [run_id]

    # A change heard with nothing in flight is fetched once, not twice.
    asked = _tally(page, "asked", "run-detail")
    with _conn(db_url) as conn:
        assert transitions.retry(conn, run_id) is not None
    expect(badge).to_have_text("pending", timeout=10_000)
    page.wait_for_timeout(1_500)
    assert _tally(page, "asked", "run-detail") == asked + 1


def test_a_change_a_throttled_region_dropped_while_refreshing_is_shown_after_it(
    start: Start, db_url: str, page: Any
) -> None:
    base = sign_in_live(start, db_url, page)
    url = f"{base}/dead-letters"  # refreshed at most every 5 s
    _open_settled(page, url, "dead-letter-groups")
    groups = page.locator("#dead-letter-groups tbody tr")
    expect(groups).to_have_count(0)

    def one_group() -> None:
        with _conn(db_url) as conn:
            declined(conn, 1)

    def another_group() -> None:
        with _conn(db_url) as conn:
            dead_letter(conn, "KeyError: 'customer'")

    _held_then_released(page, url, "dead-letter-groups", one_group, another_group)
    expect(groups).to_have_count(2, timeout=10_000)  # the held answer had one
