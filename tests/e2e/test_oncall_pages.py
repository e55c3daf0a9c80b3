"""The on-call pages (overview, runs, a run, workers) pass axe-core with no serious or
critical violation at 1280 and 390 px; screenshots go to $SUNDIAL_SHOTS (default
/tmp/shots/oncall) for a person to look at."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import run_inserts, submission, transitions
from tests.helpers.axe import violations
from tests.helpers.browser import sign_in_page
from tests.helpers.people import make_user

SHOTS = Path(os.environ.get("SUNDIAL_SHOTS", "/tmp/shots/oncall"))


def _seed(db_url: str) -> int:
    """A failed DAG step with a traceback, pending and running runs, a live worker and a
    trigger leader: every region of the pages has something to show."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        dag = dag_submission.submit_dag(
            conn,
            {"extract": run_inserts.NewRun("noop", max_retries=0, priority=9),
             "load": run_inserts.NewRun("noop")},
            [("extract", "load")],
        )  # fmt: skip
        failed = dag.run_ids["extract"]
        (job,) = transitions.claim(conn, "worker-a:4242:1f2e3d", 1, 30)
        outcome = Outcome(
            OutcomeStatus.FAILED,
            error="ConnectionError: warehouse at 10.0.0.7 refused the connection",
            traceback='Traceback (most recent call last):\n  File "etl.py", line 12\n'
            "ConnectionError: refused",
            retryable=False,
        )
        transitions.finish_many(
            conn, "worker-a:4242:1f2e3d", [transitions.Finish(failed, job.attempt, outcome)]
        )
        for _ in range(5):
            submission.submit(conn, run_inserts.NewRun("sleep", args={"seconds": 1}, priority=3))
        transitions.claim(conn, "worker-a:4242:1f2e3d", 2, 30)
        stats = {"in_flight": 2, "loop_lag_ms": 0.8, "threads_total": 4, "threads_busy": 1}
        conn.execute(
            "INSERT INTO workers (id, host, pid, concurrency, handlers, stats) VALUES "
            "('worker-a:4242:1f2e3d', 'worker-a', 4242, 8, '[\"noop\", \"sleep\", \"http\"]', %s)",
            [json.dumps(stats)],
        )
        conn.execute(
            "INSERT INTO leader_leases (name, holder, term, lease_until) "
            "VALUES ('trigger', 'trigger-b:77:aa11bb', 3, now() + interval '1 minute')"
        )
        return failed


def test_oncall_pages_pass_axe_and_are_photographed(
    live_server: str, db_url: str, browser: Any
) -> None:
    failed = _seed(db_url)
    make_user(db_url, "oncall", "operator")
    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = {
        "overview": "/",
        "runs": "/runs",
        "runs-filtered": "/runs?status=failed&error=refused",
        "run": f"/runs/{failed}",
        "workers": "/workers",
    }
    problems: dict[str, list[str]] = {}
    for width in (1280, 390):
        # axe is injected as an inline script, which the pages' CSP rightly forbids
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        page = context.new_page()
        page.set_default_timeout(10_000)
        sign_in_page(page, live_server, "oncall")
        for name, path in pages.items():
            page.goto(live_server + path)
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            found = violations(page)
            if found:
                problems[f"{name}@{width}"] = found
        context.close()
    assert problems == {}
