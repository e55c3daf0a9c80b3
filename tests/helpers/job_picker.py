"""Many job definitions, for the job picker's tests."""

from __future__ import annotations

from app.core.db import Conn


def many_jobs(conn: Conn, count: int) -> None:
    """`count` jobs named job-0001, job-0002, … in one statement."""
    conn.execute(
        "INSERT INTO job_definitions (id, name, handler) "
        "SELECT gen_random_uuid(), 'job-' || lpad(i::text, 4, '0'), 'noop' "
        "FROM generate_series(1, %s) AS i",
        (count,),
    )
