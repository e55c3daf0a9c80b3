"""On-call journeys in a real browser against a real server and real worker processes:
a poison job's dead letters, retrying a group after its count, discarding with a reason,
a run's log lines appearing while it runs. Pages pass axe-core; screenshots at 1280 and
390 px go to /tmp/shots/oncall2 (or $SUNDIAL_SHOTS) for a person to look at."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.dags import dag_submission
from app.observability import lag_slo
from app.runs import submission, transitions
from app.runs.fingerprints import QUARANTINED
from app.runs.run_inserts import NewRun
from tests.helpers.axe import violations, violations_with_axe
from tests.helpers.processes import query, services
from tests.helpers.schedules import add
from tests.helpers.waits import db_now, wait_until

SHOTS = Path(os.environ.get("SUNDIAL_SHOTS", "/tmp/shots/oncall2"))
POISON = "PaymentDeclined: card for invoice {} was declined"


def submit(db_url: str, *new_runs: NewRun) -> list[int]:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return [s.id for s in submission.submit_many(conn, list(new_runs))]


def statuses(db_url: str, ids: list[int]) -> list[str]:
    rows = query(db_url, "SELECT status FROM job_runs WHERE id = ANY(%s) ORDER BY id", ids)
    return [r["status"] for r in rows]


def shoot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def poison(db_url: str, count: int) -> list[int]:
    return submit(
        db_url,
        *(NewRun("fail", {"message": POISON.format(100 + i)}, max_retries=0) for i in range(count)),
    )


def test_a_poison_job_is_grouped_retried_after_its_count_and_discarded_with_a_reason(
    live_server: str, db_url: str, signed_in: Callable[[str], Any], tmp_path: Path
) -> None:
    ids = poison(db_url, 3)
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: statuses(db_url, ids) == ["failed"] * 3, "3 dead letters", 30, worker)
        page = signed_in("operator")
        page.get_by_role("link", name="Dead letters").click()
        group = page.get_by_role(
            "link", name="RuntimeError: PaymentDeclined: card for invoice <id> was declined"
        )
        assert page.locator("#dead-letter-groups td[data-label=Runs]").inner_text() == "3"
        shoot(page, "dead-letters")
        group.click()
        shoot(page, "dead-letter-group")
        page.get_by_role("link", name="Retry the whole group…").click()
        confirm = page.locator("#confirm-retry")
        assert "Retry 3 runs?" in confirm.inner_text()  # the dry run, before anything changes
        assert statuses(db_url, ids) == ["failed"] * 3
        page.get_by_role("button", name="Retry 3 runs").click()
        assert "Re-queued 3 runs." in page.get_by_role("status").first.inner_text()
        retried = query(db_url, "SELECT count(*) AS n FROM audit_log WHERE action = 'run.retry'")
        assert retried == [{"n": 3}]
        # the poison fails again: the same group comes back, with the same three runs
        wait_until(
            lambda: query(db_url, "SELECT min(attempt) AS a FROM job_runs")[0]["a"] == 2
            and statuses(db_url, ids) == ["failed"] * 3,
            "the retries failed again", 30, worker,
        )  # fmt: skip
        worker.stop()
    page.reload()
    page.get_by_role(
        "link", name="RuntimeError: PaymentDeclined: card for invoice <id> was declined"
    ).click()
    page.get_by_label("Discarded: these runs will not be retried").check()
    page.get_by_role("button", name="Save").click()
    assert "say why" in page.locator("#reason-error").inner_text()  # next to its field
    page.get_by_label("Why").fill("test cards from the staging shop")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(live_server + "/dead-letters?*")
    row = page.locator("#resolutions tbody tr").first.inner_text()
    assert "operator" in row and "test cards from the staging shop" in row and "discarded" in row
    assert "No dead letters" in page.locator("#dead-letter-groups").inner_text()
    (audited,) = query(
        db_url, "SELECT actor, details FROM audit_log WHERE action = 'dead_letters.discard'"
    )
    assert audited["actor"] == "operator"
    assert audited["details"]["after"]["reason"] == "test cards from the staging shop"
    shoot(page, "dead-letters-resolved")


@pytest.mark.parametrize("model", ["thread", "process"])
def test_a_runs_log_lines_appear_on_its_page_while_it_runs(
    live_server: str, db_url: str, signed_in: Callable[[str], Any], tmp_path: Path, model: str
) -> None:
    """In a thread, and in a process child, which sends its lines while it runs."""
    go = tmp_path / "go"
    (run_id,) = submit(db_url, NewRun("chatty", {"wait_file": str(go)}, execution_model=model))
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        page = signed_in("viewer")
        page.goto(f"{live_server}/runs/{run_id}")  # the run's page includes its log
        log = page.get_by_role("log")
        log.get_by_text("started, waiting for the go-ahead").wait_for()
        assert statuses(db_url, [run_id]) == ["running"]
        shoot(page, f"run-log-running-{model}")
        go.touch()  # the handler goes on: its next lines appear without a reload
        log.get_by_text("printed 2").wait_for()
        log.get_by_text("complained 2").wait_for()
        wait_until(lambda: statuses(db_url, [run_id]) == ["completed"], "completed", 30, worker)
        page.locator("#run-logs:not([hx-get])").wait_for()  # finished: polling stops
        worker.stop()
    shoot(page, f"run-log-done-{model}")


def test_a_dag_runs_steps_change_colour_as_they_complete(
    live_server: str, db_url: str, signed_in: Callable[[str], Any], tmp_path: Path
) -> None:
    go = tmp_path / "go"
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        dag = dag_submission.submit_dag(
            conn,
            {
                "extract": NewRun("echo"),
                "transform": NewRun("chatty", {"wait_file": str(go)}, execution_model="thread"),
                "report": NewRun("echo"),
            },
            [("extract", "transform"), ("transform", "report")],
            name="nightly",
        )
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # a bound on a hang: the worker starts meanwhile

    with services(db_url, tmp_path) as start:
        worker = start("worker")
        page = signed_in("viewer")
        page.get_by_role("link", name="DAG runs").click()
        page.get_by_role("link", name="nightly").click()
        nodes = page.locator("#dag-run .dag-node")
        expect(nodes.filter(has_text="transform")).to_have_class("dag-node status-running")
        expect(nodes.filter(has_text="extract")).to_have_class("dag-node status-completed")
        expect(nodes.filter(has_text="report")).to_have_class("dag-node status-blocked")
        shoot(page, "dag-run-running")
        go.touch()  # the middle step finishes: the picture follows without a reload
        expect(nodes.filter(has_text="transform")).to_have_class("dag-node status-completed")
        expect(nodes.filter(has_text="report")).to_have_class("dag-node status-completed")
        expect(page.locator("#dag-run-graph")).not_to_have_attribute("hx-trigger", "sse:runs")
        worker.stop()
    assert page.locator(f'#dag-run svg a[href="/runs/{dag.run_ids["report"]}"]').count() == 1
    shoot(page, "dag-run-done")
    page.goto(live_server + "/dag-runs")
    shoot(page, "dag-runs")


def test_on_call_pages_pass_axe(
    live_server: str, db_url: str, browser: Any, tmp_path: Path
) -> None:
    from tests.helpers.browser import sign_in_page
    from tests.helpers.dead_letters import declined
    from tests.helpers.people import make_user

    make_user(db_url, "operator", "operator")
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        run_id = declined(conn, 1)
        key = conn.execute(
            "SELECT error_fingerprint FROM job_runs WHERE id = %s", (run_id,)
        ).fetchone()
    assert key is not None
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        dag = dag_submission.submit_dag(
            conn, {"a": NewRun("noop"), "b": NewRun("noop")}, [("a", "b")]
        )
        # a schedule whose fire is long overdue (no trigger runs here): a lag alert
        add(conn, "hourly <b>sync</b>", now=db_now(conn) - timedelta(hours=3), cron="0 * * * *")
        lag_slo.set_threshold(conn, "hourly <b>sync</b>", 60, actor="test")
        quarantined = quarantine_one(conn)
    pages = {
        "quarantined-run": f"/runs/{quarantined}",
        "quarantine-group": f"/dead-letters/{QUARANTINED}",
        "dag-runs": "/dag-runs",
        "dag-run": f"/dag-runs/{dag.id}",
        "job-stats": "/job-stats",
        "lag": "/slo",
        "dead-letters": "/dead-letters",
        "dead-letter-group": f"/dead-letters/{key['error_fingerprint']}",
        "dead-letter-confirm": f"/dead-letters/{key['error_fingerprint']}/retry",
        "dead-letter-edit": f"/dead-letters/runs/{run_id}/edit",
        "run-log": f"/runs/{run_id}/logs",
    }
    problems: dict[str, list[str]] = {}
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        page = context.new_page()
        page.set_default_timeout(10_000)
        sign_in_page(page, live_server, "operator")
        for name, path in pages.items():
            page.goto(live_server + path)
            page.screenshot(path=str(SHOTS / f"axe-{name}-{width}.png"), full_page=True)
            found = violations(page)
            if found:
                problems[f"{name}@{width}"] = found
        context.close()
    assert problems == {}


def test_lag_alerts_show_on_the_overview_and_the_schedules_page(
    live_server: str, db_url: str, signed_in: Callable[[str], Any]
) -> None:
    from playwright.sync_api import expect

    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        # no trigger runs here: the schedule's fire three hours ago is long overdue
        add(conn, "hourly sync", now=db_now(conn) - timedelta(hours=3), cron="0 * * * *")
        lag_slo.set_threshold(conn, "hourly sync", 90, actor="test")
    page = signed_in("viewer")
    alerts = page.locator("#slo-alerts")
    expect(alerts).to_contain_text("Missing fire: schedule hourly sync was due to fire")
    shoot(page, "overview-with-lag-alerts")
    page.goto(live_server + "/schedules/hourly%20sync")
    section = page.locator("#schedule-slo")
    expect(section).to_contain_text("Threshold")
    expect(section).to_contain_text("1 min 30 s")
    expect(section).to_contain_text("Missing fire")
    shoot(page, "schedule-with-lag")
    assert violations_with_axe(page) == []


def quarantine_one(conn: Any) -> int:
    """A run whose workers died under it too many times (the reaper's doing)."""
    from tests.helpers.processes import one_crash_from_quarantine

    run_id = submission.submit(conn, NewRun("noop")).id
    one_crash_from_quarantine(conn, run_id)
    conn.execute("UPDATE job_runs SET priority = 100 WHERE id = %s", (run_id,))
    transitions.claim(conn, "worker-a", 1, 30)
    transitions.reap(conn, now=db_now(conn) + timedelta(minutes=5))
    return run_id
