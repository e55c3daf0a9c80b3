"""Failed runs for the dead letters' tests."""

from __future__ import annotations

from app.core.db import Conn
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish

TRACE = """Traceback (most recent call last):
  File "/srv/billing.py", line 8, in charge
    raise PaymentDeclined(order)
PaymentDeclined: card for order {0} declined
"""


def declined(conn: Conn, order: int) -> int:
    return dead_letter(
        conn, f"PaymentDeclined: card for order {order} declined", TRACE.format(order)
    )


def dead_letter(
    conn: Conn, error: str, traceback: str | None = None, *, handler: str = "charge",
    status: OutcomeStatus = OutcomeStatus.FAILED,
) -> int:  # fmt: skip
    """A run that failed for good with this error."""
    run_id = submission.submit(conn, NewRun(handler, {"order": 1}, max_retries=0)).id
    claimed = transitions.claim(conn, "w", 1000, 30)
    job = next(j for j in claimed if j.run_id == run_id)
    outcome = Outcome(status, error=error, traceback=traceback, retryable=False)
    assert transitions.finish_many(conn, "w", [Finish(run_id, job.attempt, outcome)])
    return run_id
