"""The reads behind "where the time went" have an index path for every table they touch:
with sequential scans priced out, no plan falls back to reading a whole table."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from app.core.sql import query

READS = {
    ("dag_runs", "dag_run_step_times"): {"id": uuid.uuid4(), "now": None},
    ("dag_runs", "dag_run_attempts"): {"id": uuid.uuid4()},
    ("job_stats", "job_durations_hourly"): {
        "job_key": uuid.uuid4(), "since": datetime(2026, 1, 1, tzinfo=UTC), "per_octave": 16,
    },
    ("job_stats", "job_durations_slowest"): {
        "job_key": uuid.uuid4(), "since": datetime(2026, 1, 1, tzinfo=UTC), "limit": 10,
    },
}  # fmt: skip


@pytest.mark.parametrize(("file", "name"), list(READS))
def test_each_read_goes_through_an_index(
    conn: psycopg.Connection[Any], file: str, name: str
) -> None:
    conn.execute("SET enable_seqscan = off")
    rows = conn.execute("EXPLAIN " + query(file, name), READS[file, name]).fetchall()
    plan = "\n".join(r["QUERY PLAN"] for r in rows)
    assert "Seq Scan" not in plan, plan
