"""The run state machine against a real PostgreSQL: every transition and its fence."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.core import limits
from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import run_inserts, submission, transitions
from app.runs.run_inserts import IdempotencyConflict, NewRun, SubmitError
from app.runs.transitions import Finish
from tests.helpers.waits import db_now

Conn = psycopg.Connection[Any]


def row(conn: Conn, run_id: int) -> dict[str, Any]:
    result = conn.execute("SELECT * FROM job_runs WHERE id = %s", (run_id,)).fetchone()
    assert result is not None
    return dict(result)


def attempts(conn: Conn, run_id: int) -> list[dict[str, Any]]:
    return [
        dict(r)
        for r in conn.execute(
            "SELECT * FROM job_run_attempts WHERE run_id = %s ORDER BY attempt", (run_id,)
        ).fetchall()
    ]


def failed(message: str = "boom", *, retryable: bool = True) -> Outcome:
    return Outcome(
        OutcomeStatus.FAILED, error=message, traceback="Traceback: …", retryable=retryable
    )


# ---- submit -----------------------------------------------------------------------------


def test_submit_creates_a_pending_run_with_defaults(conn: Conn) -> None:
    submitted = submission.submit(conn, NewRun("noop", {"x": 1}))
    assert submitted.created
    r = row(conn, submitted.id)
    assert (r["status"], r["handler"], r["args"], r["attempt"]) == ("pending", "noop", {"x": 1}, 0)
    assert (r["priority"], r["max_retries"], r["timeout_seconds"]) == (1, 3, 300)


def test_delay_and_run_at_use_the_database_clock(conn: Conn) -> None:
    now = db_now(conn)
    delayed = submission.submit(conn, NewRun("noop", delay=60))
    at = submission.submit(conn, NewRun("noop", run_at=now + timedelta(hours=2)))
    assert row(conn, delayed.id)["run_at"] - now >= timedelta(seconds=59)
    assert row(conn, at.id)["run_at"] == now + timedelta(hours=2)
    assert transitions.claim(conn, "w", 10, 30) == []  # nothing due yet


@pytest.mark.parametrize("size", [500, run_inserts.COPY_THRESHOLD + 1500])  # JSON path, COPY path
def test_submit_many_returns_ids_in_input_order(conn: Conn, size: int) -> None:
    now = db_now(conn)
    batch = [
        NewRun(
            "noop",
            {"i": i},
            priority=i % 7,
            delay=60 if i % 3 == 0 else None,
            run_at=now + timedelta(hours=1) if i % 3 == 1 else None,
            idempotency_key=f"k{i}" if i % 10 == 0 else None,
            execution_model="thread" if i % 2 else "async",
        )
        for i in range(size)
    ]
    submission.submit(conn, NewRun("noop", {"i": 0}, idempotency_key="k0"))  # an existing key
    submitted = submission.submit_many(conn, batch)
    assert len(submitted) == size
    rows = {
        r["id"]: r
        for r in conn.execute(
            "SELECT * FROM job_runs WHERE id = ANY(%s)", ([s.id for s in submitted],)
        )
    }
    for i, s in enumerate(submitted[1:], start=1):  # [0] is the run that held key k0
        r = rows[s.id]
        assert r["args"] == {"i": i} and r["priority"] == i % 7
        assert r["execution_model"] == ("thread" if i % 2 else "async")
        if i % 3 == 1:
            assert r["run_at"] == now + timedelta(hours=1)
        if i % 3 == 0:
            assert r["run_at"] - r["created_at"] >= timedelta(seconds=59)
    assert submitted[0].created is False and all(s.created for s in submitted[1:])
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": size}


@pytest.mark.parametrize(
    ("run", "message"),
    [
        (NewRun(""), "needs a handler"),
        (NewRun("noop", args=[1, 2]), "args must be a JSON object"),  # type: ignore[arg-type]
        (NewRun("noop", execution_model="fiber"), "execution model must be one of"),
        (NewRun("noop", timeout_seconds=0), "the timeout must be between 1 and"),
        (NewRun("noop", max_retries=-1), "max retries must be between 0 and"),
        (NewRun("noop", delay=-5), "the delay must be between 0 and"),
        (NewRun("noop", priority=99999), "priority must be between"),
        (NewRun("noop", {"when": object()}), "must hold only JSON values"),
    ],
)
def test_bad_submissions_are_refused_and_nothing_is_written(
    conn: Conn, run: NewRun, message: str
) -> None:
    with pytest.raises(SubmitError, match=message):
        submission.submit_many(conn, [NewRun("noop"), run])
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 0}


def test_same_idempotency_key_and_payload_returns_the_existing_run(conn: Conn) -> None:
    first = submission.submit(conn, NewRun("noop", {"a": 1}, idempotency_key="k1"))
    second = submission.submit(conn, NewRun("noop", {"a": 1}, idempotency_key="k1"))
    assert first.created and not second.created
    assert first.id == second.id


def test_same_key_with_different_payload_is_refused(conn: Conn) -> None:
    submission.submit(conn, NewRun("noop", {"a": 1}, idempotency_key="k1"))
    with pytest.raises(IdempotencyConflict, match="already belongs to run"):
        submission.submit(conn, NewRun("noop", {"a": 2}, idempotency_key="k1"))
    with pytest.raises(IdempotencyConflict, match="used twice in this batch"):
        submission.submit_many(
            conn, [NewRun("noop", idempotency_key="k2"), NewRun("sleep", idempotency_key="k2")]
        )
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 1}


def test_concurrent_submits_with_one_key_create_one_run(db_url: str) -> None:
    barrier = threading.Barrier(8)
    ids: list[int] = []
    errors: list[BaseException] = []

    def submit() -> None:
        try:
            with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as c:
                barrier.wait()
                ids.append(
                    submission.submit(c, NewRun("noop", {"n": 1}, idempotency_key="once")).id
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(ids)) == 1
    with psycopg.connect(db_url) as c:
        assert c.execute("SELECT count(*) FROM job_runs").fetchone() == (1,)


# ---- claim -------------------------------------------------------------------------------


def test_claim_orders_by_priority_then_age_and_increments_attempt(conn: Conn) -> None:
    low = submission.submit(conn, NewRun("noop", priority=1)).id
    high = submission.submit(conn, NewRun("noop", priority=5)).id
    low2 = submission.submit(conn, NewRun("noop", priority=1)).id
    claimed = transitions.claim(conn, "w1", 2, 30)
    assert [j.run_id for j in claimed] == [high, low]
    assert all(j.attempt == 1 for j in claimed)
    r = row(conn, high)
    assert (r["status"], r["lease_owner"], r["attempt"]) == ("running", "w1", 1)
    assert r["lease_until"] - r["started_at"] == timedelta(seconds=30)
    assert [j.run_id for j in transitions.claim(conn, "w2", 5, 30)] == [low2]


def test_two_workers_never_claim_the_same_run(db_url: str, conn: Conn) -> None:
    submission.submit_many(conn, [NewRun("noop") for _ in range(2000)])
    claimed: list[list[int]] = [[], []]

    def work(i: int) -> None:
        with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as c:
            while batch := transitions.claim(c, f"w{i}", 50, 30):
                claimed[i].extend(j.run_id for j in batch)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(claimed[0]) + len(claimed[1]) == 2000
    assert not set(claimed[0]) & set(claimed[1])


# ---- heartbeat, finish, fencing ----------------------------------------------------------


def test_complete_records_result_and_history(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    (_job,) = transitions.claim(conn, "w1", 1, 30)
    won = transitions.finish_many(conn, "w1", [Finish(run_id, 1, Outcome.completed({"ok": True}))])
    assert len(won) == 1
    r = row(conn, run_id)
    assert (r["status"], r["result"], r["lease_owner"]) == ("completed", {"ok": True}, None)
    assert r["finished_at"] is not None
    (history,) = attempts(conn, run_id)
    assert (history["attempt"], history["outcome"], history["worker"]) == (1, "completed", "w1")


def test_failure_retries_with_backoff_then_dead_letters_with_traceback(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("fail", max_retries=2)).id
    for attempt in (1, 2, 3):
        conn.execute("UPDATE job_runs SET run_at = now() WHERE id = %s", (run_id,))
        (job,) = transitions.claim(conn, "w1", 1, 30)
        assert job.attempt == attempt
        transitions.finish_many(conn, "w1", [Finish(run_id, attempt, failed(f"boom {attempt}"))])
        r = row(conn, run_id)
        if attempt < 3:
            assert r["status"] == "pending"
            assert r["finished_at"] is None
        assert r["last_error"] == f"boom {attempt}"
    r = row(conn, run_id)
    assert (r["status"], r["attempt"], r["traceback"]) == ("failed", 3, "Traceback: …")
    assert [a["outcome"] for a in attempts(conn, run_id)] == ["failed"] * 3


def test_non_retryable_failure_fails_at_once(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("nope", max_retries=5)).id
    transitions.claim(conn, "w1", 1, 30)
    transitions.finish_many(conn, "w1", [Finish(run_id, 1, failed("no handler", retryable=False))])
    assert row(conn, run_id)["status"] == "failed"


def test_timeout_on_last_attempt_ends_timed_out(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("sleep", max_retries=0)).id
    transitions.claim(conn, "w1", 1, 30)
    outcome = Outcome(OutcomeStatus.TIMED_OUT, error="timed out after 1s")
    transitions.finish_many(conn, "w1", [Finish(run_id, 1, outcome)])
    assert row(conn, run_id)["status"] == "timed_out"


def test_stale_finish_after_reap_and_reclaim_changes_nothing(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    transitions.claim(conn, "zombie", 1, 30)
    later = db_now(conn) + timedelta(seconds=31)
    assert [r.status for r in transitions.reap(conn, now=later)] == ["pending"]
    (job,) = transitions.claim(conn, "fresh", 1, 30)
    assert job.attempt == 2
    transitions.finish_many(conn, "fresh", [Finish(run_id, 2, Outcome.completed("new"))])
    # the paused worker wakes up and reports its old attempt
    assert (
        transitions.finish_many(conn, "zombie", [Finish(run_id, 1, Outcome.completed("old"))]) == []
    )
    assert transitions.finish_many(conn, "zombie", [Finish(run_id, 1, failed())]) == []
    r = row(conn, run_id)
    assert (r["status"], r["attempt"], r["result"]) == ("completed", 2, "new")
    assert [(a["attempt"], a["outcome"]) for a in attempts(conn, run_id)] == [
        (1, "lost"),
        (2, "completed"),
    ]


def test_heartbeat_renews_own_leases_and_reports_lost_and_cancelled(conn: Conn) -> None:
    a, b, c = (submission.submit(conn, NewRun("noop")).id for _ in range(3))
    transitions.claim(conn, "w1", 3, 5)
    before = row(conn, a)["lease_until"]
    transitions.cancel(conn, b)
    # c was reaped and re-claimed by someone else
    conn.execute("UPDATE job_runs SET lease_until = now() - interval '1 s' WHERE id = %s", (c,))
    transitions.reap(conn)
    transitions.claim(conn, "w2", 1, 30)
    result = transitions.heartbeat(conn, "w1", [(a, 1), (b, 1), (c, 1)], 60)
    assert result.renewed == {(a, 1), (b, 1)}
    assert result.cancel_requested == {(b, 1)}
    assert result.lost == {(c, 1)}
    assert row(conn, a)["lease_until"] > before


def test_heartbeat_does_not_call_a_row_locked_by_a_finish_lost(db_url: str, conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    transitions.claim(conn, "w1", 1, 30)
    with psycopg.connect(db_url, row_factory=dict_row) as other:
        other.execute("SELECT 1 FROM job_runs WHERE id = %s FOR UPDATE", (run_id,))
        result = transitions.heartbeat(conn, "w1", [(run_id, 1)], 30)
        other.rollback()
    assert result.lost == set()


# ---- reaper ------------------------------------------------------------------------------


def test_reap_requeues_expired_leases_only(conn: Conn) -> None:
    a_minute_ago = db_now(conn) - timedelta(minutes=1)
    expired = submission.submit(conn, NewRun("noop"), now=a_minute_ago).id
    transitions.claim(conn, "w1", 1, 30, now=a_minute_ago)  # its lease ended 30 s ago
    healthy = submission.submit(conn, NewRun("noop")).id
    transitions.claim(conn, "w1", 1, 30)
    reaped = transitions.reap(conn)
    assert [(r.run_id, r.status, r.worker) for r in reaped] == [(expired, "pending", "w1")]
    assert row(conn, healthy)["status"] == "running"
    assert "stopped heartbeating" in row(conn, expired)["last_error"]


def test_reap_counts_crashes_apart_from_retries_and_quarantines_at_the_limit(
    conn: Conn,
) -> None:
    run_id = submission.submit(conn, NewRun("crash", max_retries=0)).id
    deaths = limits.WORKER_DEATHS_PER_CRASH * limits.DEFAULT_MAX_CRASHES
    statuses = []
    for _ in range(deaths):
        transitions.claim(conn, "w1", 1, 30)
        (reaped,) = transitions.reap(conn, now=db_now(conn) + timedelta(minutes=1))
        statuses.append((reaped.status, reaped.crashed, reaped.quarantined, reaped.crash_count))
    # no retry allowed, yet its workers' deaths did not end it until the last
    assert statuses == [("pending", True, False, n) for n in range(1, deaths)] + [
        ("failed", True, True, deaths)
    ]
    r = row(conn, run_id)
    assert (r["status"], r["attempt"], r["crash_count"], r["quarantined"]) == (
        "failed",
        deaths,
        deaths,
        True,
    )
    assert r["finished_at"] is not None
    assert r["last_error"].startswith(
        f"quarantined after {deaths} crashes, each of them a worker death"
    )


def test_reap_never_requeues_a_cancelled_run(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("sleep")).id
    transitions.claim(conn, "w1", 1, 30)
    assert transitions.cancel(conn, run_id) == "running"  # requested; worker then died
    transitions.reap(conn, now=db_now(conn) + timedelta(minutes=1))
    assert row(conn, run_id)["status"] == "cancelled"
    assert transitions.claim(conn, "w2", 10, 30) == []


def test_reap_cannot_touch_a_run_completed_meanwhile(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    transitions.claim(conn, "w1", 1, 30)
    transitions.finish_many(conn, "w1", [Finish(run_id, 1, Outcome.completed())])
    assert transitions.reap(conn, now=db_now(conn) + timedelta(hours=1)) == []
    assert row(conn, run_id)["status"] == "completed"


# ---- cancel, release, retry, aging -------------------------------------------------------


def test_cancel_pending_is_immediate_and_finished_runs_are_left_alone(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    assert transitions.cancel(conn, run_id) == "cancelled"
    assert transitions.cancel(conn, run_id) is None
    assert transitions.claim(conn, "w", 1, 30) == []


def test_cancelled_finish_of_a_running_run(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("sleep")).id
    transitions.claim(conn, "w1", 1, 30)
    transitions.cancel(conn, run_id)
    outcome = Outcome(OutcomeStatus.CANCELLED, error="cancelled while running")
    assert len(transitions.finish_many(conn, "w1", [Finish(run_id, 1, outcome)])) == 1
    assert row(conn, run_id)["status"] == "cancelled"


def test_release_hands_back_without_using_up_an_attempt(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("sleep", max_retries=0)).id
    transitions.claim(conn, "w1", 1, 30)
    assert transitions.release_many(conn, "w1", [(run_id, 1)]) == [run_id]
    (job,) = transitions.claim(conn, "w2", 1, 30)
    assert job.attempt == 2  # the fencing token still moves forward
    transitions.finish_many(conn, "w2", [Finish(run_id, 2, failed())])
    # max_retries=0 allows one counted attempt; the hand-back did not count
    assert row(conn, run_id)["status"] == "failed"
    assert [a["outcome"] for a in attempts(conn, run_id)] == ["released", "failed"]


def test_retry_a_dead_letter_with_a_fresh_budget(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("fail", max_retries=0)).id
    transitions.claim(conn, "w1", 1, 30)
    transitions.finish_many(conn, "w1", [Finish(run_id, 1, failed())])
    assert transitions.retry(conn, run_id)
    assert not transitions.retry(conn, run_id)  # already pending
    (job,) = transitions.claim(conn, "w1", 1, 30)
    assert job.attempt == 2
    transitions.finish_many(conn, "w1", [Finish(run_id, 2, failed())])
    assert row(conn, run_id)["status"] == "failed"


def test_aging_raises_waiting_runs_one_level_per_period_up_to_the_bound(conn: Conn) -> None:
    old = submission.submit(
        conn, NewRun("noop", priority=0), now=db_now(conn) - timedelta(hours=1)
    ).id
    fresh = submission.submit(conn, NewRun("noop", priority=0)).id
    for _ in range(10):
        transitions.age_priorities(conn, age_seconds=600, max_boost=3)
    assert row(conn, old)["priority"] == 3  # 60 min waited: 6 periods, capped at +3
    assert row(conn, fresh)["priority"] == 0
    high = submission.submit(conn, NewRun("noop", priority=2)).id
    assert [j.run_id for j in transitions.claim(conn, "w", 2, 30)] == [old, high]


def test_notifications_wake_workers_once_per_statement_and_carry_no_args(
    db_url: str, conn: Conn
) -> None:
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {transitions.NOTIFY_CHANNEL}")
        submission.submit_many(conn, [NewRun("noop", {"secret": "s3cr3t"}) for _ in range(50)])
        received = list(listener.notifies(timeout=1.0))
    assert len(received) == 1
    assert received[0].payload == ""


def test_a_large_batch_with_bad_args_is_refused_and_nothing_is_written(conn: Conn) -> None:
    batch = [NewRun("noop", {"i": i}) for i in range(run_inserts.COPY_THRESHOLD + 10)]
    batch[-1] = NewRun("noop", {"when": object()})
    with pytest.raises(SubmitError, match="must hold only JSON values"):
        submission.submit_many(conn, batch)
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 0}
    # the session's staging table is usable again afterwards
    assert len(submission.submit_many(conn, batch[:-1])) == run_inserts.COPY_THRESHOLD + 9


def test_completing_clears_the_error_of_an_earlier_attempt(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop")).id
    transitions.claim(conn, "w1", 1, 30)
    transitions.finish_many(conn, "w1", [Finish(run_id, 1, failed("boom 1"))])
    conn.execute("UPDATE job_runs SET run_at = now() WHERE id = %s", (run_id,))
    transitions.claim(conn, "w1", 1, 30)
    transitions.finish_many(conn, "w1", [Finish(run_id, 2, Outcome.completed("fine"))])
    done = row(conn, run_id)
    assert (done["status"], done["result"]) == ("completed", "fine")
    assert (done["last_error"], done["traceback"]) == (None, None)
    assert [(h["attempt"], h["outcome"], h["error"]) for h in attempts(conn, run_id)] == [
        (1, "failed", "boom 1"),
        (2, "completed", None),
    ]


def test_every_transition_runs_on_the_clock_it_is_given(conn: Conn) -> None:
    t = db_now(conn) + timedelta(days=3)  # far from the database's clock: no coincidence
    run_id = submission.submit(conn, NewRun("noop"), now=t).id
    (spec,) = transitions.claim(conn, "w1", 10, 30, now=t)
    transitions.heartbeat(conn, "w1", [(run_id, spec.attempt)], 30, now=t + timedelta(seconds=10))
    assert row(conn, run_id)["lease_until"] == t + timedelta(seconds=40)
    done = Finish(run_id, spec.attempt, Outcome(OutcomeStatus.COMPLETED, result=None))
    assert transitions.finish_many(conn, "w1", [done], now=t + timedelta(seconds=20)) == [done]
    assert row(conn, run_id)["finished_at"] == t + timedelta(seconds=20)
    assert attempts(conn, run_id)[0]["finished_at"] == t + timedelta(seconds=20)

    waiting = submission.submit(conn, NewRun("noop"), now=t).id
    assert transitions.cancel(conn, waiting, now=t + timedelta(seconds=30)) == "cancelled"
    assert row(conn, waiting)["finished_at"] == t + timedelta(seconds=30)
    assert transitions.retry(conn, waiting, now=t + timedelta(seconds=40)) is not None
    assert row(conn, waiting)["run_at"] == t + timedelta(seconds=40)


def test_a_release_and_a_dag_cancel_run_on_the_clock_they_are_given(conn: Conn) -> None:
    t = db_now(conn) - timedelta(days=3)
    run_id = submission.submit(conn, NewRun("noop", max_retries=0), now=t).id
    (spec,) = transitions.claim(conn, "w1", 10, 30, now=t)
    conn.execute("UPDATE job_runs SET cancel_requested = true WHERE id = %s", (run_id,))
    assert transitions.release_many(conn, "w1", [(run_id, spec.attempt)], now=t) == [run_id]
    assert row(conn, run_id)["finished_at"] == t

    dag = dag_submission.submit_dag(conn, {"A": NewRun("noop"), "B": NewRun("noop")}, [("A", "B")])
    transitions.cancel_dag(conn, dag.id, now=t)
    assert {row(conn, i)["finished_at"] for i in dag.run_ids.values()} == {t}


def test_two_attempts_of_one_run_in_one_finish_batch_are_each_fenced_on_their_own(
    conn: Conn,
) -> None:
    """A worker whose lease expired and that claimed the run again may report both
    attempts in one batch, the newer first: the newer completes the run, the older loses
    its fence, whatever their order."""
    run_id = submission.submit(conn, NewRun("noop", max_retries=3)).id
    (first,) = transitions.claim(conn, "w", 1, 30)
    later = db_now(conn) + timedelta(seconds=60)
    assert [r.run_id for r in transitions.reap(conn, now=later)] == [run_id]
    (second,) = transitions.claim(conn, "w", 1, 30, now=later)
    assert (first.attempt, second.attempt) == (1, 2)

    won = transitions.finish_many(
        conn,
        "w",
        [
            Finish(run_id, second.attempt, Outcome.completed("second")),
            Finish(run_id, first.attempt, Outcome.completed("first")),
        ],
        now=later,
    )

    assert [(f.run_id, f.attempt) for f in won] == [(run_id, 2)]
    row = conn.execute("SELECT status, attempt, result FROM job_runs WHERE id = %s", (run_id,))
    assert row.fetchone() == {"status": "completed", "attempt": 2, "result": "second"}
