"""Ended runs for the job statistics' tests."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from app.core.db import Conn
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish


def ended(
    conn: Conn,
    handler: str,
    seconds: float,
    *,
    at: Any,
    ok: bool = True,
    job_id: uuid.UUID | None = None,
) -> int:
    """One run of `handler` (of the job `job_id`, if given) that ran `seconds` and ended
    (completed or failed) at `at`; its id."""
    new = NewRun(handler, max_retries=0, job_id=job_id)
    run_id = submission.submit(conn, new, now=at - timedelta(hours=1)).id
    conn.execute("UPDATE job_runs SET priority = 100 WHERE id = %s", (run_id,))
    (job,) = transitions.claim(conn, "w", 1, 3600, now=at - timedelta(seconds=seconds))
    conn.execute("UPDATE job_runs SET priority = 1 WHERE id = %s", (run_id,))
    outcome = (
        Outcome.completed() if ok else Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)
    )
    assert transitions.finish_many(conn, "w", [Finish(run_id, job.attempt, outcome)], now=at)
    return run_id
