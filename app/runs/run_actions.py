"""Cancel and retry as a person asks for them (dashboard or command line): the run
transition of `app.runs.transitions` and its audit entry, in one transaction.

A run in the wrong state is not an error page but a `RunActionRefused` with the reason
in words (GoodJob's habit: re-check under the lock, say
what happened).
"""

from __future__ import annotations

from typing import Any

from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import query
from app.people import audit
from app.runs import moved_runs, transitions


class RunActionRefused(UsageError):
    """The run does not exist or is not in a state that allows this."""


class RunInHistory(RunActionRefused):
    """The run ended long ago and moved to the history, where nothing changes it."""


def _snapshot(conn: Conn, run_id: int) -> dict[str, Any]:
    row = conn.execute(query("run_reads", "run_by_id"), {"id": run_id}).fetchone()
    if row is None:
        raise RunActionRefused(f"There is no run {run_id}.")
    moved = moved_runs.refusal(conn, run_id)
    if moved is not None:
        raise RunInHistory(moved)
    return {
        "status": row["status"],
        "attempt": row["attempt"],
        "cancel_requested": row["cancel_requested"],
    }


def cancel(conn: Conn, run_id: int, *, actor: str) -> str:
    """pending | blocked -> cancelled; running -> cancel requested. Audited. Returns the
    run's status afterwards (`cancelled`, or `running` while its worker stops it)."""
    with conn.transaction():
        before = _snapshot(conn, run_id)
        status = transitions.cancel(conn, run_id)
        if status is None:
            raise RunActionRefused(
                f"Run {run_id} already ended {before['status'].replace('_', ' ')}: "
                "there is nothing to cancel."
            )
        audit.record(
            conn,
            actor,
            "run.cancel",
            "run",
            str(run_id),
            before=before,
            after=_snapshot(conn, run_id),
        )
    return status


def retry(conn: Conn, run_id: int, *, actor: str) -> transitions.Retried:
    """failed | timed_out | cancelled -> pending with a fresh retry budget. Audited."""
    with conn.transaction():
        before = _snapshot(conn, run_id)
        retried = transitions.retry(conn, run_id)
        if retried is None:
            raise RunActionRefused(
                f"Run {run_id} is {before['status'].replace('_', ' ')}: only failed, timed out "
                "or cancelled runs can be retried."
            )
        after = {**_snapshot(conn, run_id), "unskipped": retried.unskipped}
        audit.record(conn, actor, "run.retry", "run", str(run_id), before=before, after=after)
    return retried
