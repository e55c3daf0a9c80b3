"""Where the time went, in a real browser: a DAG run's timeline (bars over one time axis,
the longest chain, the same in words), updating live while a real worker runs a step, and
a job's week of durations with its slowest runs. Pages fit 1280 and 390 px and pass
axe-core; screenshots go to /tmp/shots/time-spent."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from playwright.sync_api import expect
from psycopg.rows import dict_row

from app.catalog import job_definitions
from app.catalog.job_definitions import JobSpec
from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.observability import job_stats
from app.runs import transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.browser import look_at_both_widths
from tests.helpers.job_stats import ended
from tests.helpers.processes import services
from tests.helpers.waits import db_now

SHOTS = Path("/tmp/shots/time-spent")


def _finished_dag(conn: Any) -> Any:
    """extract, then load (failed once, then completed), then report, at known seconds."""
    dag = dag_submission.submit_dag(
        conn,
        {"extract": NewRun("noop"), "load the warehouse tables": NewRun("noop", max_retries=2),
         "report": NewRun("noop")},
        [("extract", "load the warehouse tables"), ("load the warehouse tables", "report")],
        name="nightly",
    )  # fmt: skip
    row = conn.execute("SELECT created_at FROM job_runs WHERE id = %s", (dag.run_ids["extract"],))
    t0 = row.fetchone()["created_at"]
    busy = Outcome(OutcomeStatus.FAILED, error="warehouse busy", retryable=True)
    done = Outcome.completed()
    for claim_at, end_at, outcome in ((2, 9, done), (10, 25, busy), (31, 70, done), (71, 80, done)):
        (c,) = transitions.claim(conn, "w", 1, 300, now=t0 + timedelta(seconds=claim_at))
        transitions.finish_many(conn, "w", [Finish(c.run_id, c.attempt, outcome)],
                                now=t0 + timedelta(seconds=end_at))  # fmt: skip
    return dag


def test_a_dag_runs_timeline_and_a_jobs_durations(
    live_server: str, db_url: str, signed_in: Callable[[str], Any]
) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        dag = _finished_dag(conn)
        job_definitions.create(conn, JobSpec(name="billing", handler="noop"), actor="test")
        job_id = job_definitions.get(conn, "billing")["id"]
        now = db_now(conn)
        for hours, seconds in ((50, 3), (50, 4), (30, 6), (20, 5), (9, 42), (3, 4), (2, 7)):
            ended(conn, "noop", seconds, at=now - timedelta(hours=hours), job_id=job_id)
        for hours in (49, 29, 9):  # the reaper filled the roll-up as those hours went by
            job_stats.fill(conn, now=now - timedelta(hours=hours))
    page = signed_in("viewer")
    page.get_by_role("link", name="DAG runs").click()
    page.get_by_role("link", name="nightly").click()
    timeline = page.locator("#dag-run-timeline")
    expect(timeline.get_by_role("heading", name="Where the time went")).to_be_visible()
    expect(timeline).to_contain_text("1 min 20 s in all")
    expect(timeline).to_contain_text("extract → load the warehouse tables → report")
    expect(timeline.locator(".gantt-row")).to_have_count(3)
    expect(timeline.locator(".gantt-critical")).to_have_count(3)
    expect(timeline.locator("rect.gantt-failed")).to_have_count(1)
    load_bar = timeline.get_by_role("img", name="load the warehouse tables: waited 9 s")
    expect(load_bar).to_be_visible()
    timeline.get_by_text("Where the time went, as a table").click()
    expect(timeline.locator("table")).to_contain_text(
        "waited 9 s for the steps before it, waited 1 s for a worker, ran 54 s, "
        "1 retry (2 attempts, 1 failed), waited 6 s to try again"
    )
    look_at_both_widths(page, SHOTS, "dag-run-timeline")
    timeline.get_by_role("link", name="report").first.click()
    page.wait_for_url(f"{live_server}/runs/{dag.run_ids['report']}")

    page.goto(f"{live_server}/jobs/billing")
    durations = page.locator("#job-durations")
    expect(durations.get_by_role("heading", name="How long its runs take")).to_be_visible()
    expect(durations.locator("circle.dot-p95")).to_have_count(6)  # one per hour with runs
    slowest = durations.locator("table").last
    expect(slowest.locator("tbody tr")).to_have_count(7)
    expect(slowest.locator("tbody tr").first).to_contain_text("42 s")
    durations.get_by_text("The hours as a table").click()
    look_at_both_widths(page, SHOTS, "job-durations")
    slowest.locator("tbody tr").first.get_by_role("link").click()
    expect(page.get_by_role("heading", name="Run")).to_be_visible()


def test_the_timeline_follows_a_running_dag(
    live_server: str, db_url: str, signed_in: Callable[[str], Any], tmp_path: Path
) -> None:
    go = tmp_path / "go"
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        dag_submission.submit_dag(
            conn,
            {"extract": NewRun("echo"),
             "transform": NewRun("chatty", {"wait_file": str(go)}, execution_model="thread")},
            [("extract", "transform")],
            name="live one",
        )  # fmt: skip
    expect.set_options(timeout=30_000)  # a bound on a hang: the worker starts meanwhile
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        page = signed_in("viewer")
        page.get_by_role("link", name="DAG runs").click()
        page.get_by_role("link", name="live one").click()
        timeline = page.locator("#dag-run-timeline")
        expect(timeline).to_contain_text("so far, from the first step's start until now")
        expect(timeline.get_by_role("img", name="transform: ")).to_have_accessible_name(
            re.compile(r"ran .* so far$")
        )
        look_at_both_widths(page, SHOTS, "dag-run-timeline-live")
        go.touch()  # the step finishes: the timeline follows without a reload
        expect(timeline).to_contain_text("in all, from the first step's start to the last")
        expect(timeline.locator("rect.gantt-open")).to_have_count(0)
        worker.stop()
