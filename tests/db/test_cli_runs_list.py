"""`sundial runs list`: the runs page's list from the shell, same filters, same paging."""

from __future__ import annotations

import json

import psycopg
from psycopg.rows import dict_row

from app.runs import run_inserts, submission
from tests.helpers.commands import run_sundial


def test_runs_list_filters_and_pages_like_the_runs_page(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        ids = [submission.submit(conn, run_inserts.NewRun(handler="noop")).id for _ in range(5)]
        other = submission.submit(conn, run_inserts.NewRun(handler="sleep")).id
        conn.execute(
            "UPDATE job_runs SET status = 'failed', last_error = 'KeyError: tenant_42', "
            "finished_at = now() WHERE id = %s",
            [ids[0]],
        )
    listed = run_sundial(db_url, "runs", "list", "--job", "noop", "--limit", "3")
    assert listed.returncode == 0, listed.stderr
    shown = [int(line.split()[0]) for line in listed.stdout.splitlines()]
    assert shown == sorted(ids, reverse=True)[:3] and other not in shown
    assert f"older runs: --before-id {shown[-1]}" in listed.stderr
    older = run_sundial(db_url, "runs", "list", "--job", "noop", "--before-id", str(shown[-1]))
    assert [int(line.split()[0]) for line in older.stdout.splitlines()] == sorted(ids)[:2][::-1]
    failed = run_sundial(db_url, "runs", "list", "--status", "failed", "--error", "tenant_4",
                         "--json")  # fmt: skip
    rows = json.loads(failed.stdout)
    assert [r["id"] for r in rows] == [ids[0]] and rows[0]["last_error"] == "KeyError: tenant_42"


def test_runs_list_says_what_is_wrong_with_a_filter(db_url: str) -> None:
    bad = run_sundial(db_url, "runs", "list", "--status", "exploded")
    assert bad.returncode == 2 and "status must be one of pending" in bad.stderr
    bad = run_sundial(db_url, "runs", "list", "--since", "yesterday")
    assert bad.returncode == 2 and "--since must be an ISO 8601 time" in bad.stderr
    bad = run_sundial(db_url, "runs", "list", "--limit", "0")
    assert bad.returncode == 2 and "--limit: must be between 1 and 500" in bad.stderr
