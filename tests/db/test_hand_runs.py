"""What the "Run now" forms offer: the arguments of the last run started by hand, read from
the audit log by its index on the subject, whatever else the log holds."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from app.catalog import hand_runs, job_definitions
from app.catalog.job_fields import JobSpec
from app.core.sql import query
from app.people import audit


def test_the_last_hand_started_run_is_found_by_the_subject_index(
    conn: psycopg.Connection[Any],
) -> None:
    job_definitions.create(conn, JobSpec(name="nightly", handler="noop"), actor="test")
    assert hand_runs.last_job_args(conn, "nightly") is None
    hand_runs.start_job(conn, "nightly", {"n": 1}, actor="alice")
    hand_runs.start_job(conn, "nightly", {"n": 2}, actor="bob")
    job_definitions.update(conn, "nightly", JobSpec(name="nightly", handler="noop",
                                                    args={"n": 0}), actor="carol")  # fmt: skip
    last = hand_runs.last_job_args(conn, "nightly")
    assert last is not None and (last.args, last.actor) == ({"n": 2}, "bob")

    conn.execute(
        "INSERT INTO audit_log (at, actor, action, target_type, target_id, subject_id, details)"
        " SELECT now(), 'x', 'job.run', 'job', 'other', gen_random_uuid(), '{}'"
        " FROM generate_series(1, 20000)"
    )
    conn.execute("ANALYZE audit_log")
    subject = job_definitions.get(conn, "nightly")["id"]
    params = {"target_type": "job", "subject_id": subject, "action": "job.run"}
    plan = "\n".join(
        r["QUERY PLAN"]
        for r in conn.execute(
            "EXPLAIN " + query("audit", "audit_last_action_on_subject"), params
        ).fetchall()
    )
    assert "ix_audit_log_subject" in plan, plan
    assert audit.last_action(conn, "job", uuid.uuid4(), "job.run") is None
