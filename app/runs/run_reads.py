"""Runs as the API and the Python client read them: typed rows (`app.runs.run_fields`),
built without validation from what the database holds."""

from __future__ import annotations

from app.core.db import Conn
from app.core.sql import query
from app.runs.run_fields import AttemptFields, RunDetailRow, RunRow


def run(conn: Conn, run_id: int) -> RunRow | None:
    """One run, or None."""
    row = conn.execute(query("run_reads", "run_by_id"), {"id": run_id}).fetchone()
    return RunRow.model_construct(**row) if row is not None else None


def run_with_attempts(conn: Conn, run_id: int) -> RunDetailRow | None:
    """One run with the attempts it finished, oldest first; or None."""
    row = conn.execute(query("run_reads", "run_by_id"), {"id": run_id}).fetchone()
    if row is None:
        return None
    attempts = conn.execute(query("run_reads", "run_attempt_list"), {"run_id": run_id})
    return RunDetailRow.model_construct(
        **row, attempts=[AttemptFields.model_construct(**a) for a in attempts]
    )
