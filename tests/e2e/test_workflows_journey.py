"""An editor builds a workflow in a real browser: a cycle is refused with the edge named,
the fixed one is saved and drawn, run now (its form, then its DAG run's page), and a real
worker process runs every step to completion while the picture turns green. The workflow
pages pass axe-core and are photographed at 1280 and 390 px (into $SUNDIAL_SHOTS,
/tmp/shots by default)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.catalog import job_definitions, workflows
from app.catalog.job_definitions import JobSpec
from app.dags import workflow_shapes
from tests.helpers.axe import violations
from tests.helpers.browser import sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import query, services
from tests.helpers.waits import wait_until

SHOTS = Path(os.environ.get("SUNDIAL_SHOTS", "/tmp/shots"))
JOBS = ("pull", "shape", "mail", "publish")
LOOP = (
    "step `load` cannot run after `report`: `report` already runs after `load` "
    "(load → transform → report → load)"
)


def make_jobs(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        for name in JOBS:
            job_definitions.create(conn, JobSpec(name=name, handler="noop"), actor="test")


def fill_step(page: Any, i: int, name: str, job: str, after: list[int]) -> None:
    page.locator(f"#step-{i}-name").fill(name)
    page.locator(f"#step-{i}-job").select_option(job)
    for j in after:
        page.locator(f"#step-{i}-after-{j}").check()


def add_step(page: Any, i: int) -> None:
    page.get_by_role("button", name="Add step").click()
    page.locator(f"#step-{i}-name").wait_for()
    # htmx focused the new step's name (autofocus), ready to type
    wait_until(lambda: page.evaluate("document.activeElement.id") == f"step-{i}-name", "focus")


def test_a_workflow_is_built_refused_with_a_cycle_saved_drawn_and_run_by_a_worker(
    live_server: str, db_url: str, signed_in: Callable[[str], Any], tmp_path: Path
) -> None:
    make_jobs(db_url)
    page = signed_in("editor")
    page.get_by_role("link", name="Workflows").click()
    page.get_by_role("link", name="New workflow").click()
    page.get_by_label("Name", exact=True).fill("nightly etl")
    fill_step(page, 0, "load", "pull", [])
    add_step(page, 1)
    fill_step(page, 1, "transform", "shape", [0])
    # the "runs after" choices of step 2 are labelled with step 1's name as typed
    assert page.locator("label[for=step-1-after-0]").inner_text() == "load"
    add_step(page, 2)
    fill_step(page, 2, "report", "mail", [1])
    page.locator("#step-0-after-2").check()  # load after report: a loop

    # the live preview already says it would be refused
    wait_until(lambda: LOOP in page.locator("#dag-preview").inner_text(), "preview refusal")
    page.get_by_role("button", name="Create workflow").click()
    page.locator("#steps-error").wait_for()
    assert page.locator("#steps-error").inner_text() == LOOP
    assert query(db_url, "SELECT count(*) AS n FROM workflows") == [{"n": 0}]

    page.locator("#step-0-after-2").uncheck()
    add_step(page, 3)
    fill_step(page, 3, "publish", "publish", [2])
    wait_until(lambda: page.locator("#dag-preview .dag-node").count() == 4, "preview of 4")
    page.get_by_role("button", name="Create workflow").click()
    page.wait_for_url(live_server + "/workflows/nightly%20etl")
    assert page.locator("#workflow-dag .dag-node").count() == 4
    assert page.locator("#workflow-dag .dag-edge").count() == 3
    saved = query(db_url, "SELECT upstream, downstream FROM workflow_edges ORDER BY 1")
    assert {(e["upstream"], e["downstream"]) for e in saved} == {
        ("load", "transform"), ("transform", "report"), ("report", "publish"),
    }  # fmt: skip

    page.get_by_role("link", name="Run now").click()
    page.get_by_role("heading", name="Run workflow nightly etl").wait_for()
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(live_server + "/dag-runs/*")
    page.goto(live_server + "/workflows/nightly%20etl")
    assert page.locator("#workflow-dag .dag-node.status-pending").count() == 1
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "4")
        wait_until(
            lambda: (
                query(db_url, "SELECT status, count(*) AS n FROM job_runs GROUP BY 1")
                == [{"status": "completed", "n": 4}]
            ),
            "all four steps completed",
            60,
            worker,
        )
    page.reload()
    assert page.locator("#workflow-dag .dag-node.status-completed").count() == 4
    assert page.locator("#workflow-dag .dag-legend").inner_text().strip() == "completed"
    runs = query(db_url, "SELECT dag_node, started_at, finished_at FROM job_runs ORDER BY id")
    at = {r["dag_node"]: r for r in runs}
    for up, down in [("load", "transform"), ("transform", "report"), ("report", "publish")]:
        assert at[down]["started_at"] >= at[up]["finished_at"]


def test_workflow_pages_pass_axe_and_are_photographed(
    live_server: str, db_url: str, browser: Any
) -> None:
    make_user(db_url, "admin", "admin")
    make_jobs(db_url)
    steps = {
        "pull": workflow_shapes.Step("pull"),
        "shape <b>it</b>": workflow_shapes.Step("shape"),
        "check": workflow_shapes.Step("shape"),
        "mail": workflow_shapes.Step("mail"),
        "publish the quarterly numbers": workflow_shapes.Step("publish"),
    }
    edges = [("pull", "shape <b>it</b>"), ("pull", "check"), ("shape <b>it</b>", "mail"),
             ("check", "mail"), ("pull", "publish the quarterly numbers"),
             ("mail", "publish the quarterly numbers")]  # fmt: skip
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        spec = workflows.WorkflowSpec("etl", steps, edges, "Numbers for the morning")
        workflows.define(conn, spec, actor="test")
        edges.append(("check", "shape <b>it</b>"))
        changed = workflows.WorkflowSpec("etl", steps, edges, "Numbers for the morning")
        workflows.define(conn, changed, actor="test", replace=True)
        dag = workflows.run_now(conn, "etl")
        conn.execute(
            "UPDATE job_runs SET status = 'failed', finished_at = now() WHERE id = %s",
            (dag.run_ids["pull"],),
        )
    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = {
        "workflows": "/workflows",
        "workflow-show": "/workflows/etl",
        "workflow-edit": "/workflows/etl/edit",
        "workflow-new": "/workflows/new",
        "workflow-history": "/workflows/etl/history",
        "workflow-run": "/workflows/etl/run",
        "job-history": "/jobs/pull/history",
    }
    problems: dict[str, list[str]] = {}
    for width in (1280, 390):
        # axe is injected as an inline script, which the pages' CSP rightly forbids
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        page = context.new_page()
        page.set_default_timeout(10_000)
        sign_in_page(page, live_server, "admin")
        for name, path in pages.items():
            page.goto(live_server + path)
            if name == "workflow-show":
                page.get_by_text("Steps as a list", exact=True).click()
                picture = page.locator("#workflow-dag")
                picture.screenshot(path=str(SHOTS / f"workflow-picture-{width}.png"))
                # at 390 px the picture is as wide as the screen allows, not wider
                box = picture.locator("svg").bounding_box()
                assert box is not None and box["width"] <= width
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            found = violations(page)
            if found:
                problems[f"{name}@{width}"] = found
        # the editor showing a refused loop, with errors next to the steps
        page.goto(live_server + "/workflows/etl/edit")
        page.locator("#step-0-after-4").check()
        page.get_by_role("button", name="Save changes").click()
        page.locator("#steps-error").wait_for()
        page.screenshot(path=str(SHOTS / f"workflow-refused-{width}.png"), full_page=True)
        found = violations(page)
        if found:
            problems[f"workflow-refused@{width}"] = found
        context.close()
    assert problems == {}
