"""`sundial runs cancel|retry|rerun`: the runs list's filter options, the count asked or
confirmed with --yes, batches, and refusals in a sentence with exit code 2."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from app.runs import run_inserts, submission
from tests.helpers.commands import run_sundial


def test_runs_cancel_then_retry_every_run_a_filter_matches(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        runs = [run_inserts.NewRun(handler="nightly-report", args={"i": i}) for i in range(1500)]
        submission.submit_many(conn, [*runs, run_inserts.NewRun(handler="noop")])
    asked = run_sundial(db_url, "runs", "cancel", "--job", "nightly-report")
    assert asked.returncode == 2
    assert "Cancel 1,500 runs matching: job nightly-report? Add --yes to confirm." in asked.stderr
    done = run_sundial(db_url, "runs", "cancel", "--job", "nightly-report", "--yes")
    assert done.returncode == 0, done.stderr
    assert "Cancel 1,500 runs matching: job nightly-report: 1,500 cancelled." in done.stdout
    assert "1,000 of 1,500 done" in done.stderr
    again = run_sundial(db_url, "runs", "retry", "--job", "nightly-report", "--yes")
    assert "1,500 queued again" in again.stdout
    skipped = run_sundial(db_url, "runs", "retry", "--job", "noop", "--yes")
    assert "0 queued again, 1 skipped (they had not failed" in skipped.stdout
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        statuses = conn.execute(
            "SELECT status, count(*) AS n FROM job_runs GROUP BY status"
        ).fetchall()
        audit = conn.execute("SELECT action FROM audit_log ORDER BY id").fetchall()
    assert {r["status"]: r["n"] for r in statuses} == {"pending": 1501}
    assert [a["action"] for a in audit] == ["runs.bulk_cancel", "runs.bulk_retry",
                                           "runs.bulk_retry"]  # fmt: skip


def test_runs_cancel_refuses_a_bad_or_missing_filter_in_a_sentence(db_url: str) -> None:
    bad = run_sundial(db_url, "runs", "cancel", "--status", "exploded", "--yes")
    assert bad.returncode == 2 and "status must be one of pending" in bad.stderr
    bad = run_sundial(db_url, "runs", "retry", "--since", "yesterday", "--yes")
    assert bad.returncode == 2 and "--since must be an ISO 8601 time" in bad.stderr
    none = run_sundial(db_url, "runs", "cancel", "--yes")
    assert none.returncode == 2
    assert "say which runs to cancel: a filter such as --status failed" in none.stderr
    both = run_sundial(db_url, "runs", "cancel", "--run", "1", "--status", "failed", "--yes")
    assert both.returncode == 2 and "not both" in both.stderr
    nothing = run_sundial(db_url, "runs", "rerun", "--status", "failed", "--yes")
    assert nothing.returncode == 0 and "None match: nothing to do." in nothing.stdout
