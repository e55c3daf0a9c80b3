"""Dead letters against a real PostgreSQL: failures grouped by the fingerprint their
failing transition stored, group retry re-queues what its dry run counted, resolutions
record who and why, every change audited."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.rows import tuple_row

from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import dead_letters, submission, transitions
from app.runs.dead_letters import DeadLetterError
from app.runs.fingerprints import QUARANTINED, fingerprint_of
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.dead_letters import TRACE, dead_letter, declined
from tests.helpers.processes import one_crash_from_quarantine
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]


def rows(conn: Conn, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return conn.cursor(row_factory=tuple_row).execute(sql, params).fetchall()


def test_failures_group_by_fingerprint_with_counts_and_a_sparkline(conn: Conn) -> None:
    for order in (1, 22, 333):
        declined(conn, order)
    timeout = dead_letter(conn, "timed out after 5 s", status=OutcomeStatus.TIMED_OUT)
    groups = {g.fingerprint: g for g in dead_letters.groups(conn)}
    key = fingerprint_of("PaymentDeclined: card for order 1 declined", TRACE.format(1)).key
    assert set(groups) == {key, fingerprint_of("timed out after 5 s", None).key}
    pay = groups[key]
    assert (pay.runs, pay.exception, pay.frame) == (3, "PaymentDeclined", "/srv/billing.py:charge")
    assert pay.message == "PaymentDeclined: card for order <id> declined"
    assert pay.sample_error == "PaymentDeclined: card for order 333 declined"
    assert pay.first_seen <= pay.last_seen
    assert len(pay.hourly) == dead_letters.SPARK_HOURS and pay.hourly[-1] == 3
    assert sum(pay.hourly[:-1]) == 0
    stored = rows(conn, "SELECT error_fingerprint FROM job_runs WHERE id = %s", timeout)
    assert stored == [(fingerprint_of("timed out after 5 s", None).key,)]


def test_a_retry_that_fails_again_does_not_group_while_pending(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("charge", max_retries=3)).id
    (job,) = transitions.claim(conn, "w", 1, 30)
    failure = Outcome(OutcomeStatus.FAILED, error="ValueError: 1", retryable=True)
    transitions.finish_many(conn, "w", [Finish(run_id, job.attempt, failure)])
    assert dead_letters.groups(conn) == []  # pending again: retrying, not a dead letter


def test_the_reaper_fingerprints_every_quarantine_alike(conn: Conn) -> None:
    quarantined = []
    for worker in ("w1", "w2"):
        run_id = submission.submit(conn, NewRun("charge", max_retries=0)).id
        one_crash_from_quarantine(conn, run_id)
        transitions.claim(conn, worker, 1, 30)
        later = db_now(conn).replace(year=db_now(conn).year + 1)
        (reaped,) = transitions.reap(conn, now=later)
        assert reaped.status == "failed" and reaped.quarantined
        quarantined.append(run_id)
    stored = rows(conn, "SELECT error_fingerprint FROM job_runs WHERE id = ANY(%s)", quarantined)
    assert stored == [(QUARANTINED,), (QUARANTINED,)]
    (group,) = dead_letters.groups(conn)
    assert group.message.startswith("quarantined") and group.runs == 2


def test_retry_group_requeues_exactly_what_its_dry_run_counted(conn: Conn) -> None:
    ids = [declined(conn, n) for n in range(5)]
    other = dead_letter(conn, "KeyError: 'x'")
    key = fingerprint_of("PaymentDeclined: card for order 0 declined", TRACE.format(0)).key
    counted = dead_letters.group_count(conn, key)
    assert counted == dead_letters.GroupCount(runs=5, hot=5)
    assert dead_letters.retry_group(conn, key, actor="alice") == counted.retryable
    statuses = dict(rows(conn, "SELECT id, status FROM job_runs"))
    assert [statuses[i] for i in ids] == ["pending"] * 5 and statuses[other] == "failed"
    assert dead_letters.group_count(conn, key) == dead_letters.GroupCount(0, 0)
    audit = rows(
        conn, "SELECT action, count(*) FROM audit_log WHERE actor = 'alice' GROUP BY 1 ORDER BY 1"
    )
    assert audit == [("dead_letters.retry_group", 1), ("run.retry", 5)]


def test_retry_selected_skips_runs_someone_already_retried(conn: Conn) -> None:
    a, b = declined(conn, 1), declined(conn, 2)
    transitions.retry(conn, a)
    assert dead_letters.retry_runs(conn, [a, b], actor="bob") == [b]
    with pytest.raises(DeadLetterError):
        dead_letters.retry_runs(conn, [], actor="bob")


def test_edit_args_then_retry_records_before_and_after(conn: Conn) -> None:
    run_id = declined(conn, 7)
    assert dead_letters.retry_with_args(conn, run_id, {"order": 8}, actor="carol")
    assert rows(conn, "SELECT status, args FROM job_runs WHERE id = %s", run_id) == [
        ("pending", {"order": 8})
    ]
    ((details,),) = rows(conn, "SELECT details FROM audit_log WHERE action = 'run.retry_with_args'")
    assert details["before"]["args"] == {"order": 1} and details["after"]["args"] == {"order": 8}
    assert not dead_letters.retry_with_args(conn, run_id, {"order": 9}, actor="carol")
    with pytest.raises(DeadLetterError, match="JSON object"):
        dead_letters.retry_with_args(conn, run_id, [1], actor="carol")


def test_discard_records_who_and_why_and_a_new_failure_reopens_the_group(conn: Conn) -> None:
    declined(conn, 1)
    declined(conn, 2)
    key = fingerprint_of("PaymentDeclined: card for order 0 declined", TRACE.format(0)).key
    with pytest.raises(DeadLetterError, match="say why"):
        dead_letters.resolve_group(conn, key, "discarded", "  ", actor="dave")
    saved = dead_letters.resolve_group(conn, key, "discarded", "test orders", actor="dave")
    assert (saved.actor, saved.reason, saved.runs, saved.action) == (
        "dave",
        "test orders",
        2,
        "discarded",
    )
    assert dead_letters.groups(conn) == []
    assert [r.reason for r in dead_letters.recent_resolutions(conn)] == ["test orders"]
    ((details,),) = rows(
        conn,
        "SELECT details FROM audit_log WHERE actor = 'dave' AND action = 'dead_letters.discard'",
    )
    assert details["after"]["reason"] == "test orders"
    assert details["before"] == {"open_runs": 2}
    declined(conn, 3)
    (reopened,) = dead_letters.groups(conn)
    assert (reopened.fingerprint, reopened.runs) == (key, 1)
    with pytest.raises(DeadLetterError):
        dead_letters.resolve_group(conn, "0000000000000000", "resolved", "x", actor="dave")


def test_a_big_group_is_counted_up_to_the_cap_with_exact_first_and_last_failure(
    conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dead_letters, "COUNT_CAP", 2)
    ids = [declined(conn, order) for order in (1, 22, 333)]
    finished = conn.execute(
        "SELECT min(finished_at) AS first, max(finished_at) AS last FROM job_runs"
    ).fetchone()
    assert finished is not None
    (listed,) = dead_letters.groups(conn)
    shown = dead_letters.group(conn, listed.fingerprint)
    assert shown is not None
    for g in (listed, shown):
        assert (g.runs, g.runs_shown) == (3, "2+")
        assert (g.first_seen, g.last_seen) == (finished["first"], finished["last"])
        assert g.sample_run_id == ids[-1]
    assert dead_letters.group_count(conn, listed.fingerprint).retryable == 3  # exact
