"""Runs for the worker's tests: submitting one, waiting for its status, and reading its row
and attempts.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.runs import submission
from app.runs.run_inserts import NewRun
from tests.helpers.processes import query, run_row, wait_until

MODELS = ["async", "thread", "process", "subprocess"]


def submit(db_url: str, *new_runs: NewRun) -> list[int]:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return [s.id for s in submission.submit_many(conn, list(new_runs))]


def wait_status(
    db_url: str, run_id: int, *wanted: str, timeout: float = 30, service: Any = None
) -> dict[str, Any]:
    wait_until(
        lambda: status_of(db_url, run_id) in wanted, f"run {run_id} {wanted}", timeout, service
    )
    return run_row(db_url, run_id)


def attempt_outcomes(db_url: str, run_id: int) -> list[str]:
    rows = query(
        db_url, "SELECT outcome FROM job_run_attempts WHERE run_id = %s ORDER BY attempt", run_id
    )
    return [r["outcome"] for r in rows]


def status_of(db_url: str, run_id: int) -> str:
    return str(run_row(db_url, run_id)["status"])
