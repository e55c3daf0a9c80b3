"""Sundial's public Python API, under a name that cannot collide with an application's own
`app` package (the implementation lives in `app/`).

    from sundial import NewRun, Sundial, handler, JobContext

    with Sundial() as client:
        client.submit("send_invoice", {"invoice": 42}, idempotency_key="invoice-42")
"""

from app.client import Sundial
from app.core.db import DatabaseUnavailable, DatabaseUrlError
from app.core.errors import UsageError
from app.dags.dag_graph import DagError
from app.handlers import handler
from app.handlers.jobs import Cancelled, JobContext, NonRetryableError, Snooze
from app.runs.run_actions import RunInHistory
from app.runs.run_inserts import IdempotencyConflict, NewRun, SubmitError
from app.runs.transitions import RetryBusy

__all__ = [
    "Cancelled",
    "DagError",
    "DatabaseUnavailable",
    "DatabaseUrlError",
    "IdempotencyConflict",
    "JobContext",
    "NewRun",
    "NonRetryableError",
    "RetryBusy",
    "RunInHistory",
    "Snooze",
    "SubmitError",
    "Sundial",
    "UsageError",
    "handler",
]
