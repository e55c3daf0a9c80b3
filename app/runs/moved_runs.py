"""Runs that ended long enough ago to have moved to the history (`app.runs.history`).

Pages, the API and the command line read them through the `all_*` views like any other run,
but nothing changes them any more: retry, cancel or a new run's wait on them act on the hot
tables only. Those doors ask here first, to say so in words and point to a re-run (a new
run with the same arguments) instead of answering "no such run".
"""

from __future__ import annotations

from datetime import UTC, datetime

from app.core.db import Conn
from app.core.sql import query


def in_history(conn: Conn, run_id: int, *, instead: str = "re-run it") -> str | None:
    """The sentence every door answers with when the run is in the history (`instead`: what
    to do rather); None when it is hot or there is no such run."""
    row = conn.execute(query("run_reads", "run_in_history"), {"id": run_id}).fetchone()
    if row is None:
        return None
    return sentence(run_id, row["finished_at"], instead=instead)


def refusal(conn: Conn, run_id: int, *, instead: str = "re-run it") -> str | None:
    """`in_history`'s answer as a sentence of its own (capital, full stop), for an error
    that says only that; None when the run is hot or there is no such run."""
    moved = in_history(conn, run_id, instead=instead)
    return None if moved is None else f"{moved[:1].upper()}{moved[1:]}."


def sentence(run_id: int, finished: datetime | None, *, instead: str = "re-run it") -> str:
    when = f" at {finished.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if finished else ""
    return (
        f"run {run_id} ended{when} and is in the history now, where it no longer changes; "
        f"{instead} instead"
    )
