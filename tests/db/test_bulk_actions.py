"""Bulk actions against a real PostgreSQL: the batch transitions, skip counting, the one
audit entry, resuming after the process working on an action died, and the filter's WHERE
shared with the runs list."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from app.core.sql import load
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import bulk_actions, submission, transitions
from app.runs.bulk_actions import BulkVerb, Selection
from app.runs.run_inserts import NewRun
from app.runs.run_list import RunFilter
from app.runs.transitions import Finish
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]
OWNER = "test:owner"


def statuses(conn: Conn) -> dict[str, int]:
    rows = conn.execute("SELECT status, count(*) AS n FROM job_runs GROUP BY status").fetchall()
    return {r["status"]: r["n"] for r in rows}


def submit(conn: Conn, n: int, handler: str = "noop", **settings: Any) -> list[int]:
    runs = [NewRun(handler=handler, args={"i": i}, **settings) for i in range(n)]
    return [s.id for s in submission.submit_many(conn, runs)]


def fail_all(conn: Conn, worker: str = "w1") -> None:
    claimed = transitions.claim(conn, worker, 10_000, 60)
    outcome = Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)
    transitions.finish_many(conn, worker, [Finish(c.run_id, c.attempt, outcome) for c in claimed])


def finish_action(conn: Conn, action_id: int) -> dict[str, Any]:
    bulk_actions.run_all(conn, action_id, owner=OWNER)
    return bulk_actions.get(conn, action_id)


def test_the_bulk_queries_select_by_the_runs_lists_where_word_for_word() -> None:
    sql = load("web")

    def where(name: str) -> str:
        match = re.search(r"\nWHERE (.*?)(?:ORDER BY|$)", sql[name], re.S)
        assert match, name
        return match.group(1).strip().rstrip(";")

    assert where("run_match_ids") == where("run_list") == where("run_match_count")


def test_cancel_many_cancels_waiting_runs_and_leaves_ended_ones(conn: Conn) -> None:
    done = submit(conn, 2)
    claimed = transitions.claim(conn, "w1", 2, 60)
    ok = Outcome(OutcomeStatus.COMPLETED)
    transitions.finish_many(conn, "w1", [Finish(c.run_id, c.attempt, ok) for c in claimed])
    waiting = submit(conn, 3)
    changed = transitions.cancel_many(conn, done + waiting)
    assert sorted(changed) == sorted(waiting)
    assert statuses(conn) == {"completed": 2, "cancelled": 3}


def test_retry_many_queues_failed_runs_again_and_skips_the_others(conn: Conn) -> None:
    submit(conn, 3)
    fail_all(conn)
    pending = submit(conn, 2)
    ids = [r["id"] for r in conn.execute("SELECT id FROM job_runs").fetchall()]
    retried = transitions.retry_many(conn, ids)
    assert len(retried) == 3 and not set(r.run_id for r in retried) & set(pending)
    assert statuses(conn) == {"pending": 5}


def test_retry_many_leaves_command_runs_to_admins(conn: Conn) -> None:
    conn.execute(
        "INSERT INTO fleet_settings (name, value) VALUES ('shell_handler_enabled', 'true')"
    )
    shell = submit(conn, 1, handler="shell")
    plain = submit(conn, 1)
    transitions.cancel_many(conn, shell + plain)
    retried = transitions.retry_many(conn, shell + plain, may_run_commands=False)
    assert [r.run_id for r in retried] == plain


def test_a_filter_cancels_in_batches_counts_skips_and_is_audited_once(conn: Conn) -> None:
    old = submit(conn, 5, handler="other")
    submit(conn, 3)
    fail_all(conn)  # 8 failed
    waiting = submit(conn, 2500)
    where = RunFilter(job="noop")
    action_id = bulk_actions.start(
        conn, BulkVerb.CANCEL, Selection(where=where), actor="alice", owner=OWNER
    )
    later = submit(conn, 4)  # newer than the count: left alone
    action = bulk_actions.get(conn, action_id)
    assert action["total"] == 2503 and action["status"] == "running"
    assert bulk_actions.run_batch(conn, action_id, owner=OWNER)  # 1,000 of them
    assert bulk_actions.get(conn, action_id)["done"] == 1000
    action = finish_action(conn, action_id)
    assert (action["status"], action["done"], action["skipped"]) == ("finished", 2500, 3)
    assert "2,500 cancelled, 3 skipped (they had already ended)" in action["state"]
    cancelled = conn.execute("SELECT id FROM job_runs WHERE status = 'cancelled'").fetchall()
    assert {r["id"] for r in cancelled} == set(waiting)
    assert all(r["status"] == "pending" for r in _rows(conn, later))
    assert all(r["status"] == "failed" for r in _rows(conn, old))
    entries = conn.execute(
        "SELECT * FROM audit_log WHERE action LIKE 'runs.bulk%%' OR action LIKE 'run.%%'"
    ).fetchall()
    assert len(entries) == 1
    entry = entries[0]
    assert (entry["action"], entry["actor"]) == ("runs.bulk_cancel", "alice")
    assert entry["details"]["after"]["filter"] == {"job": "noop"}
    assert entry["details"]["after"]["count"] == 2503


def _rows(conn: Conn, ids: list[int]) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM job_runs WHERE id = ANY(%s)", (ids,)).fetchall()


def test_ticked_runs_are_retried_and_unknown_ids_skipped(conn: Conn) -> None:
    ids = submit(conn, 3)
    fail_all(conn)
    selection = Selection(run_ids=(ids[0], ids[2], 999_999))
    action_id = bulk_actions.start(conn, BulkVerb.RETRY, selection, actor="bob", owner=OWNER)
    action = finish_action(conn, action_id)
    assert (action["done"], action["skipped"]) == (2, 1)
    assert [r["status"] for r in _rows(conn, ids)].count("pending") == 2
    assert action["title"].startswith("Retry 3 ticked runs (#")


def test_rerun_submits_new_runs_with_the_same_arguments(conn: Conn) -> None:
    ids = submit(conn, 2, priority=7, queue="reports")
    transitions.cancel_many(conn, ids)
    waiting = submit(conn, 1)
    selection = Selection(run_ids=(*ids, *waiting))
    action_id = bulk_actions.start(conn, BulkVerb.RERUN, selection, actor="bob", owner=OWNER)
    action = finish_action(conn, action_id)
    assert (action["done"], action["skipped"]) == (2, 1)
    new = conn.execute(
        "SELECT args, priority, queue FROM job_runs WHERE id > %s ORDER BY id", (waiting[0],)
    ).fetchall()
    assert sorted(r["args"]["i"] for r in new) == [0, 1]
    assert all((r["priority"], r["queue"]) == (7, "reports") for r in new)


def test_an_action_whose_process_died_is_taken_over_where_it_stopped(conn: Conn) -> None:
    submit(conn, 2300)
    action_id = bulk_actions.start(
        conn, BulkVerb.CANCEL, Selection(where=RunFilter(status="pending")),
        actor="alice", owner="dead:process",
    )  # fmt: skip
    assert bulk_actions.run_batch(conn, action_id, owner="dead:process")
    assert bulk_actions.take_over(conn, owner=OWNER) == []  # its lease still runs
    assert not bulk_actions.get(conn, action_id)["interrupted"]
    later = db_now(conn) + timedelta(seconds=bulk_actions.LEASE_SECONDS + 1)
    assert bulk_actions.get(conn, action_id, now=later)["interrupted"]
    state = bulk_actions.get(conn, action_id, now=later)["state"]
    assert "interrupted after 1,000 of 2,300" in state
    assert bulk_actions.take_over(conn, owner=OWNER, now=later) == [action_id]
    assert not bulk_actions.run_batch(conn, action_id, owner="dead:process")  # fenced out
    action = finish_action(conn, action_id)
    assert (action["done"], action["skipped"], action["resumed"]) == (2300, 0, 1)
    assert statuses(conn) == {"cancelled": 2300}


def test_a_filter_that_matches_nothing_finishes_at_once(conn: Conn) -> None:
    action_id = bulk_actions.start(
        conn, BulkVerb.CANCEL, Selection(where=RunFilter(status="failed")),
        actor="alice", owner=OWNER,
    )  # fmt: skip
    assert not bulk_actions.run_batch(conn, action_id, owner=OWNER)
    action = bulk_actions.get(conn, action_id)
    assert (action["total"], action["status"]) == (0, "finished")


@pytest.mark.parametrize(
    ("where", "words"),
    [
        (
            RunFilter(status="timed_out", job="nightly-report"),
            "status timed out, job nightly-report",
        ),
        (RunFilter(), "every run (no filter)"),
    ],
)
def test_a_filter_reads_as_words_and_survives_storage(where: RunFilter, words: str) -> None:
    selection = Selection(where=where)
    assert bulk_actions.describe(selection) == words
    assert bulk_actions.filter_from_json(bulk_actions.filter_json(where)) == where
    assert bulk_actions.question(BulkVerb.CANCEL, 1234, selection) == (
        f"Cancel 1,234 runs matching: {words}?"
    )


def test_the_largest_run_id_is_an_id_like_any_other(conn: Conn) -> None:
    selection = Selection(run_ids=(2**63 - 1,))
    action_id = bulk_actions.start(conn, BulkVerb.RETRY, selection, actor="bob", owner=OWNER)
    action = finish_action(conn, action_id)
    assert (action["total"], action["done"], action["skipped"]) == (1, 0, 1)


def test_cancel_many_asks_the_worker_of_a_running_run_to_stop_it(conn: Conn) -> None:
    (running,) = submit(conn, 1)
    (claimed,) = transitions.claim(conn, "w1", 1, 60)
    assert transitions.cancel_many(conn, [running]) == [running]
    row = conn.execute("SELECT * FROM job_runs WHERE id = %s", (running,)).fetchone()
    assert row is not None and (row["status"], row["cancel_requested"]) == ("running", True)
    beat = transitions.heartbeat(conn, "w1", [(claimed.run_id, claimed.attempt)], 60)
    assert beat.cancel_requested == {(running, 1)}
