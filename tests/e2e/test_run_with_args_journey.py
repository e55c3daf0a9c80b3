"""An operator starts a job and a workflow by hand in a real browser, with a real worker:
"Run now" opens a form of the handler's declared arguments filled with the job's own, a
value the server refuses is marked next to its field, the run starts with the arguments
typed and opens at once, the worker completes it, and the next form is filled from it.
Each page fits 1280 and 390 px and passes axe-core; screenshots go to /tmp/shots/run-args."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.catalog import job_definitions, workflows
from app.catalog.job_fields import JobSpec
from app.catalog.workflows import WorkflowSpec
from app.dags.workflow_shapes import Step
from tests.helpers.browser import look_at_both_widths, sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import query, services
from tests.helpers.waits import wait_until

SHOTS = Path("/tmp/shots/run-args")


def make_job_and_workflow(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        report = JobSpec(name="weekly report", handler="send_report_args",
                         args={"email": "ops@example.com"})  # fmt: skip
        job_definitions.create(conn, report, actor="test")
        job_definitions.create(conn, JobSpec(name="tidy up", handler="noop"), actor="test")
        steps = {"report": Step("weekly report"), "tidy": Step("tidy up", {"keep": 3})}
        workflows.define(conn, WorkflowSpec("month end", steps, [("report", "tidy")]),
                         actor="test")  # fmt: skip


def statuses(db_url: str) -> list[str]:
    return [r["status"] for r in query(db_url, "SELECT status FROM job_runs ORDER BY id")]


def test_an_operator_runs_a_job_and_a_workflow_with_arguments_of_their_choosing(
    live_server: str, db_url: str, browser: Any, tmp_path: Path
) -> None:
    make_user(db_url, "operator", "operator")
    make_job_and_workflow(db_url)
    # axe is injected as an inline script, which the pages' CSP rightly forbids
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(10_000)
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "2")
        declared = "SELECT 1 FROM workers WHERE handler_args::jsonb ? 'send_report_args'"
        wait_until(
            lambda: query(db_url, declared),
            "the worker to declare the report's arguments",
            60,
            worker,
        )
        sign_in_page(page, live_server, "operator")
        page.goto(live_server + "/jobs/weekly%20report")
        look_at_both_widths(page, SHOTS, "job-page")
        page.get_by_role("link", name="Run now").click()
        page.get_by_role("heading", name="Run job weekly report").wait_for()
        assert page.get_by_text("Filled in with the job's own arguments").is_visible()
        email = page.get_by_label("Email (required)")
        assert email.input_value() == "ops@example.com"
        assert page.get_by_label("Retries").input_value() == "3"  # the schema's default
        look_at_both_widths(page, SHOTS, "job-form")

        email.fill("   ")  # passes the browser's check; the server's says what is wrong
        page.get_by_role("button", name="Start run").click()
        page.locator("#arg-1-error").wait_for()
        assert page.locator("#arg-1-error").inner_text() == "email is required"
        assert page.get_by_text("Nothing was started").is_visible()
        look_at_both_widths(page, SHOTS, "job-form-refused")
        assert statuses(db_url) == []

        page.get_by_label("Email (required)").fill("boss@example.com")
        page.get_by_label("Retries").fill("5")
        page.get_by_role("button", name="Start run").click()
        page.wait_for_url(re.compile(r".*/runs/\d+$"))
        (run,) = query(db_url, "SELECT id, args FROM job_runs")
        assert page.url == f"{live_server}/runs/{run['id']}"
        assert run["args"] == {"email": "boss@example.com", "retries": 5}
        wait_until(lambda: statuses(db_url) == ["completed"], "the run to complete", 60, worker)
        page.reload()
        assert page.locator("h1 .badge").inner_text() == "completed"
        look_at_both_widths(page, SHOTS, "job-run")

        page.goto(live_server + "/jobs/weekly%20report/run")
        assert page.get_by_text("Filled in from your last run on").is_visible()
        assert page.get_by_label("Email (required)").input_value() == "boss@example.com"
        assert page.get_by_label("Retries").input_value() == "5"

        page.goto(live_server + "/workflows/month%20end")
        page.get_by_role("link", name="Run now").click()
        page.get_by_role("heading", name="Run workflow month end").wait_for()
        assert page.get_by_label("Email (required)").input_value() == "ops@example.com"
        tidy = page.get_by_label("Arguments for step tidy (JSON object)")
        assert tidy.input_value() == '{\n  "keep": 3\n}'
        look_at_both_widths(page, SHOTS, "workflow-form")
        page.get_by_label("Email (required)").fill("team@example.com")
        tidy.fill('{"keep": 1}')
        page.get_by_role("button", name="Start run").click()
        page.wait_for_url(re.compile(r".*/dag-runs/[0-9a-f-]+$"))
        page.get_by_role("heading", name="DAG run month end").wait_for()
        wait_until(lambda: statuses(db_url) == ["completed"] * 3, "the DAG run", 60, worker)
        steps = query(db_url, "SELECT dag_node, args FROM job_runs WHERE dag_node IS NOT NULL")
        assert {s["dag_node"]: s["args"] for s in steps} == {
            "report": {"email": "team@example.com", "retries": 3}, "tidy": {"keep": 1}}  # fmt: skip
        page.reload()
        look_at_both_widths(page, SHOTS, "workflow-run")
    context.close()
