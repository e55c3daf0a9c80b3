"""DAG runs in the state machine: release and skip in the upstream's own transaction."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.dags import dag_submission
from app.dags.dag_graph import DagError
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.processes import finish_run
from tests.helpers.waits import wait_until_blocked

Conn = psycopg.Connection[Any]


def statuses(conn: Conn, dag: dag_submission.SubmittedDag) -> dict[str, str]:
    rows = conn.execute(
        "SELECT id, status FROM job_runs WHERE id = ANY(%s)", (list(dag.run_ids.values()),)
    ).fetchall()
    by_id = {r["id"]: r["status"] for r in rows}
    return {name: by_id[run_id] for name, run_id in dag.run_ids.items()}


def run_node(
    conn: Conn, dag: dag_submission.SubmittedDag, name: str, outcome: Outcome | None = None
) -> None:
    """Claim exactly that node (it must be pending) and finish it."""
    finish_run(conn, dag.run_ids[name], outcome)


def diamond(conn: Conn) -> dag_submission.SubmittedDag:
    nodes = {name: NewRun("noop") for name in "ABCD"}
    return dag_submission.submit_dag(conn, nodes, [("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")])


def test_diamond_releases_each_node_when_its_last_upstream_completes(conn: Conn) -> None:
    dag = diamond(conn)
    assert statuses(conn, dag) == {"A": "pending", "B": "blocked", "C": "blocked", "D": "blocked"}
    run_node(conn, dag, "A")
    assert statuses(conn, dag) == {
        "A": "completed",
        "B": "pending",
        "C": "pending",
        "D": "blocked",
    }
    run_node(conn, dag, "B")
    assert statuses(conn, dag)["D"] == "blocked"
    run_node(conn, dag, "C")
    assert statuses(conn, dag)["D"] == "pending"
    run_node(conn, dag, "D")
    assert set(statuses(conn, dag).values()) == {"completed"}


def test_upstream_failure_skips_exactly_its_transitive_dependents(conn: Conn) -> None:
    nodes = {name: NewRun("noop", max_retries=0) for name in "ABCDEF"}
    # A -> B -> C -> D, A -> E, F independent
    dag = dag_submission.submit_dag(conn, nodes, [("A", "B"), ("B", "C"), ("C", "D"), ("A", "E")])
    run_node(conn, dag, "A")
    failure = Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)
    run_node(conn, dag, "B", failure)
    assert statuses(conn, dag) == {
        "A": "completed",
        "B": "failed",
        "C": "skipped",
        "D": "skipped",
        "E": "pending",
        "F": "pending",
    }
    row = conn.execute(
        "SELECT skip_reason FROM job_runs WHERE id = %s", (dag.run_ids["D"],)
    ).fetchone()
    assert row == {"skip_reason": "upstream_failed"}


FAILURE = Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)


def remaining(conn: Conn, dag: dag_submission.SubmittedDag, name: str) -> int:
    row = conn.execute(
        "SELECT upstream_remaining FROM job_runs WHERE id = %s", (dag.run_ids[name],)
    ).fetchone()
    assert row is not None
    return int(row["upstream_remaining"])


def test_retrying_a_failed_step_lets_what_it_skipped_wait_again(conn: Conn) -> None:
    nodes = {name: NewRun("noop", max_retries=0) for name in "ABCDE"}
    dag = dag_submission.submit_dag(conn, nodes, [("A", "B"), ("B", "C"), ("C", "D"), ("A", "E")])
    run_node(conn, dag, "A")
    run_node(conn, dag, "B", FAILURE)
    retried = transitions.retry(conn, dag.run_ids["B"])
    assert retried is not None
    assert retried.unskipped == [dag.run_ids["C"], dag.run_ids["D"]]
    assert statuses(conn, dag) == {
        "A": "completed",
        "B": "pending",
        "C": "blocked",
        "D": "blocked",
        "E": "pending",
    }
    assert (remaining(conn, dag, "C"), remaining(conn, dag, "D")) == (1, 1)
    for name in "BECD":
        run_node(conn, dag, name)
    assert set(statuses(conn, dag).values()) == {"completed"}


def test_a_step_skipped_by_two_failures_waits_again_only_once_both_are_retried(
    conn: Conn,
) -> None:
    nodes = {name: NewRun("noop", max_retries=0) for name in "BCD"}
    dag = dag_submission.submit_dag(conn, nodes, [("B", "D"), ("C", "D")])
    run_node(conn, dag, "B", FAILURE)
    run_node(conn, dag, "C", FAILURE)
    first = transitions.retry(conn, dag.run_ids["B"])
    assert first is not None and first.unskipped == []  # C still failed: D stays skipped
    assert statuses(conn, dag)["D"] == "skipped"
    second = transitions.retry(conn, dag.run_ids["C"])
    assert second is not None and second.unskipped == [dag.run_ids["D"]]
    assert (statuses(conn, dag)["D"], remaining(conn, dag, "D")) == ("blocked", 2)
    run_node(conn, dag, "C")
    run_node(conn, dag, "B")
    assert statuses(conn, dag)["D"] == "pending"


def test_a_step_waits_again_for_an_upstream_still_under_way(conn: Conn) -> None:
    nodes = {name: NewRun("noop", max_retries=0) for name in "BCD"}
    dag = dag_submission.submit_dag(conn, nodes, [("B", "D"), ("C", "D")])
    run_node(conn, dag, "B", FAILURE)  # D is skipped while C has not run yet
    assert statuses(conn, dag) == {"B": "failed", "C": "pending", "D": "skipped"}
    assert transitions.retry(conn, dag.run_ids["B"]) is not None
    assert (statuses(conn, dag)["D"], remaining(conn, dag, "D")) == ("blocked", 2)
    run_node(conn, dag, "C")
    run_node(conn, dag, "B")
    assert statuses(conn, dag)["D"] == "pending"


def test_a_retry_that_cannot_lock_the_dag_writes_nothing_and_says_try_again(
    conn: Conn, db_url: str
) -> None:
    nodes = {name: NewRun("noop", max_retries=0) for name in "BCD"}
    dag = dag_submission.submit_dag(conn, nodes, [("B", "D"), ("C", "D")])
    run_node(conn, dag, "B", FAILURE)
    with psycopg.connect(db_url) as finishing:  # holds C's row as a finish would
        finishing.execute("SELECT 1 FROM job_runs WHERE id = %s FOR UPDATE", (dag.run_ids["C"],))
        with pytest.raises(transitions.RetryBusy, match="try again"):
            transitions.retry(conn, dag.run_ids["B"])
        assert statuses(conn, dag) == {"B": "failed", "C": "pending", "D": "skipped"}
    assert transitions.retry(conn, dag.run_ids["B"]) is not None


def test_a_retrying_upstream_does_not_skip_its_dependents(conn: Conn) -> None:
    dag = dag_submission.submit_dag(
        conn, {"A": NewRun("noop", max_retries=2), "B": NewRun("noop")}, [("A", "B")]
    )
    run_node(conn, dag, "A", Outcome(OutcomeStatus.FAILED, error="flaky"))
    assert statuses(conn, dag) == {"A": "pending", "B": "blocked"}


def test_fan_in_upstreams_completing_at_once_release_the_dependent_once(db_url: str) -> None:
    width = 20
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        nodes = {f"u{i}": NewRun("noop") for i in range(width)} | {"join": NewRun("noop")}
        dag = dag_submission.submit_dag(conn, nodes, [(f"u{i}", "join") for i in range(width)])
        jobs = transitions.claim(conn, "w", width, 30)
    barrier = threading.Barrier(width)
    errors: list[BaseException] = []

    def finish(job: Any) -> None:
        try:
            with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as c:
                barrier.wait()
                transitions.finish_many(
                    c, "w", [Finish(job.run_id, job.attempt, Outcome.completed())]
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=finish, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        row = conn.execute(
            "SELECT status, upstream_remaining FROM job_runs WHERE id = %s",
            (dag.run_ids["join"],),
        ).fetchone()
    assert row == {"status": "pending", "upstream_remaining": 0}


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        ([("A", "B"), ("B", "C"), ("C", "A")], "cycle: A -> B -> C -> A"),
        ([("A", "A")], "cannot depend on itself"),
        ([("A", "Z")], "unknown node 'Z'"),
    ],
)
def test_bad_dags_are_refused_and_nothing_is_written(
    conn: Conn, edges: list[tuple[str, str]], message: str
) -> None:
    with pytest.raises(DagError, match=message):
        dag_submission.submit_dag(conn, {n: NewRun("noop") for n in "ABC"}, edges)
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 0}


def test_submit_after_a_single_run(conn: Conn) -> None:
    first = submission.submit(conn, NewRun("noop")).id
    second = dag_submission.submit_after(conn, NewRun("noop"), [first])
    assert conn.execute("SELECT status FROM job_runs WHERE id = %s", (second,)).fetchone() == {
        "status": "blocked"
    }
    (job,) = transitions.claim(conn, "w", 5, 30)
    transitions.finish_many(conn, "w", [Finish(first, job.attempt, Outcome.completed())])
    assert conn.execute("SELECT status FROM job_runs WHERE id = %s", (second,)).fetchone() == {
        "status": "pending"
    }
    # after a completed run: due at once; after a failed one: skipped at once
    assert dag_submission.submit_after(conn, NewRun("noop"), [first]) > second
    dead = submission.submit(conn, NewRun("noop")).id
    transitions.cancel(conn, dead)
    skipped = dag_submission.submit_after(conn, NewRun("noop"), [dead])
    assert conn.execute(
        "SELECT status, skip_reason FROM job_runs WHERE id = %s", (skipped,)
    ).fetchone() == {"status": "skipped", "skip_reason": "upstream_failed"}
    with pytest.raises(DagError, match="no such run"):
        dag_submission.submit_after(conn, NewRun("noop"), [987654])


def test_cancel_dag_cancels_what_has_not_finished(conn: Conn) -> None:
    dag = diamond(conn)
    run_node(conn, dag, "A")
    conn.execute("UPDATE job_runs SET priority = 100 WHERE id = %s", (dag.run_ids["B"],))
    transitions.claim(conn, "w", 1, 30)  # B running
    assert transitions.cancel_dag(conn, dag.id) == {"cancelled": 2, "requested": 1}
    assert statuses(conn, dag) == {
        "A": "completed",
        "B": "running",
        "C": "cancelled",
        "D": "cancelled",
    }


def test_each_workflow_fire_creates_one_dag_run_even_when_fired_twice(conn: Conn) -> None:
    schedule_id, workflow_id = uuid.uuid4(), uuid.uuid4()
    fire_time = conn.execute("SELECT date_trunc('minute', now()) AS t").fetchone()["t"]
    fire = dag_submission.WorkflowFire(
        schedule_id=schedule_id,
        workflow_id=workflow_id,
        name="nightly",
        fire_time=fire_time,
        run_at=fire_time,
        steps={"extract": NewRun("noop"), "load": NewRun("noop")},
        edges=[("extract", "load")],
    )
    with conn.transaction():
        (first,) = dag_submission.submit_workflow_fires(conn, [fire])
    with conn.transaction():
        assert dag_submission.submit_workflow_fires(conn, [fire]) == [None]  # a second trigger
    assert first is not None
    rows = conn.execute(
        "SELECT dag_node, status, schedule_id, fire_time FROM job_runs WHERE dag_run_id = %s "
        "ORDER BY dag_node",
        (first,),
    ).fetchall()
    assert [(r["dag_node"], r["status"]) for r in rows] == [
        ("extract", "pending"),
        ("load", "blocked"),
    ]
    assert {(r["schedule_id"], r["fire_time"]) for r in rows} == {(schedule_id, fire_time)}
    assert conn.execute("SELECT count(*) AS n FROM dag_runs").fetchone() == {"n": 1}


def test_submit_dag_records_its_dag_run(conn: Conn) -> None:
    dag = dag_submission.submit_dag(conn, {"a": NewRun("noop")}, [], name="adhoc")
    assert conn.execute("SELECT name FROM dag_runs WHERE id = %s", (dag.id,)).fetchone() == {
        "name": "adhoc"
    }


def claim_node(conn: Conn, dag: dag_submission.SubmittedDag, name: str) -> transitions.Finish:
    """Claim exactly that node (it must be pending) and say it completed."""
    conn.execute("UPDATE job_runs SET priority = 100 WHERE id = %s", (dag.run_ids[name],))
    (job,) = transitions.claim(conn, "w", 1, 30)
    assert job.run_id == dag.run_ids[name]
    return Finish(job.run_id, job.attempt, Outcome.completed())


def test_a_finish_claims_the_steps_it_releases_for_its_worker_in_its_transaction(
    db_url: str, conn: Conn
) -> None:
    dag = diamond(conn)
    done = claim_node(conn, dag, "A")
    claim = transitions.DownstreamClaim(limit=10, lease_seconds=30)
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {transitions.NOTIFY_CHANNEL}")
        assert transitions.finish_many(conn, "w2", [done], claim_downstream=claim) == [done]
        woken = list(listener.notifies(timeout=0.5, stop_after=1))
    assert woken == []  # nothing is left for other workers
    assert sorted(j.run_id for j in claim.jobs) == sorted([dag.run_ids["B"], dag.run_ids["C"]])
    assert all(j.attempt == 1 and j.upstream_results == {"A": None} for j in claim.jobs)
    assert claim.limit == 8
    rows = conn.execute(
        "SELECT status, lease_owner, started_at IS NOT NULL AS started FROM job_runs "
        "WHERE id = ANY(%s)",
        ([j.run_id for j in claim.jobs],),
    ).fetchall()
    assert rows == [{"status": "running", "lease_owner": "w2", "started": True}] * 2
    assert statuses(conn, dag)["D"] == "blocked"


def test_a_finish_claims_no_more_than_its_limit_and_wakes_workers_for_the_rest(
    db_url: str, conn: Conn
) -> None:
    dag = diamond(conn)
    done = claim_node(conn, dag, "A")
    claim = transitions.DownstreamClaim(limit=1, lease_seconds=30)
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {transitions.NOTIFY_CHANNEL}")
        transitions.finish_many(conn, "w2", [done], claim_downstream=claim)
        woken = list(listener.notifies(timeout=1.0, stop_after=1))
    assert len(woken) == 1
    assert len(claim.jobs) == 1 and claim.limit == 0
    assert sorted(statuses(conn, dag).values()) == ["blocked", "completed", "pending", "running"]


def test_a_finish_starts_freed_steps_best_first_and_leaves_the_rest_to_others(
    db_url: str, conn: Conn
) -> None:
    """A fan-in waits for its last upstream; of the steps a completion frees, the due
    ones start highest priority first up to the limit, with every upstream's result (the
    one completed in this very transaction too); a step not due yet, and those over the
    limit, are left pending, other workers woken and the dashboard told of the start."""
    later = datetime.now(UTC) + timedelta(hours=1)
    nodes = {
        "A": NewRun("noop"),
        "B": NewRun("noop"),
        "fan_in": NewRun("noop", priority=1),
        "urgent": NewRun("noop", priority=9),
        "later": NewRun("noop", priority=20, run_at=later),
    }
    edges = [("A", "fan_in"), ("B", "fan_in"), ("A", "urgent"), ("A", "later")]
    dag = dag_submission.submit_dag(conn, nodes, edges)
    b_done = claim_node(conn, dag, "B")
    b_done = Finish(b_done.run_id, b_done.attempt, Outcome.completed({"rows": 2}))
    claim = transitions.DownstreamClaim(limit=1, lease_seconds=30)
    transitions.finish_many(conn, "w2", [b_done], claim_downstream=claim)
    assert claim.jobs == [] and statuses(conn, dag)["fan_in"] == "blocked"

    a_done = claim_node(conn, dag, "A")
    a_done = Finish(a_done.run_id, a_done.attempt, Outcome.completed({"rows": 1}))
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {transitions.NOTIFY_CHANNEL}")
        listener.execute("LISTEN sundial_events")
        transitions.finish_many(conn, "w2", [a_done], claim_downstream=claim)
        heard = {n.channel for n in listener.notifies(timeout=1.0, stop_after=3)}
    assert heard == {transitions.NOTIFY_CHANNEL, "sundial_events"}
    (started,) = claim.jobs
    assert started.run_id == dag.run_ids["urgent"] and started.attempt == 1
    assert started.upstream_results == {"A": {"rows": 1}}
    assert claim.limit == 0
    shown = statuses(conn, dag)
    assert (shown["urgent"], shown["fan_in"], shown["later"]) == ("running", "pending", "pending")

    (fan_in,) = transitions.claim(conn, "w3", 1, 30)  # another worker takes the step left over
    assert fan_in.run_id == dag.run_ids["fan_in"]
    assert fan_in.upstream_results == {"A": {"rows": 1}, "B": {"rows": 2}}


def test_a_step_started_after_waiting_for_a_concurrent_finish_gets_every_upstream_result(
    db_url: str, conn: Conn
) -> None:
    """Both upstreams of a fan-in complete at once on two workers. The second finish waits
    for the first's lock on the fan-in, then releases and starts it: the step's upstream
    results include the one committed during that wait (its statement's snapshot predates
    it), not a null in its place."""
    dag = dag_submission.submit_dag(
        conn,
        {"x": NewRun("noop"), "y": NewRun("noop"), "fan_in": NewRun("noop")},
        [("x", "fan_in"), ("y", "fan_in")],
    )
    x_done, y_done = claim_node(conn, dag, "x"), claim_node(conn, dag, "y")
    claim = transitions.DownstreamClaim(limit=5, lease_seconds=30)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as other:
        finishing_y = threading.Thread(
            target=transitions.finish_many,
            args=(other, "wy", [Finish(y_done.run_id, y_done.attempt, Outcome.completed("y"))]),
            kwargs={"claim_downstream": claim},
        )
        with conn.transaction():  # x's finish holds the fan-in's row lock until it commits
            transitions.finish_many(
                conn, "wx", [Finish(x_done.run_id, x_done.attempt, Outcome.completed("x"))]
            )
            finishing_y.start()
            wait_until_blocked(conn, other.info.backend_pid)
        finishing_y.join(timeout=10)
    (fan_in,) = claim.jobs
    assert fan_in.run_id == dag.run_ids["fan_in"]
    assert fan_in.upstream_results == {"x": "x", "y": "y"}


def fail_in_thread(db_url: str, job: transitions.Finish) -> tuple[psycopg.Connection[Any], Any]:
    """A connection and a thread that fails `job`'s attempt on it (started by the caller)."""
    other = psycopg.connect(db_url, autocommit=True, row_factory=dict_row)
    failure = Finish(job.run_id, job.attempt, FAILURE)
    return other, threading.Thread(target=transitions.finish_many, args=(other, "w", [failure]))


def test_a_run_submitted_after_a_step_while_an_upstream_of_that_step_fails_is_skipped(
    db_url: str, conn: Conn
) -> None:
    """B waits on A. While a run is submitted to start after B (its transaction holds B's
    row), A fails: the failure waits for B's lock to skip B, then the new run, committed
    during that wait, is skipped too rather than left waiting for ever on a skipped B."""
    dag = dag_submission.submit_dag(
        conn, {"A": NewRun("noop", max_retries=0), "B": NewRun("noop")}, [("A", "B")]
    )
    other, failing = fail_in_thread(db_url, claim_node(conn, dag, "A"))
    with other:
        with conn.transaction():
            after_b = dag_submission.submit_after(conn, NewRun("noop"), [dag.run_ids["B"]])
            failing.start()
            wait_until_blocked(conn, other.info.backend_pid)
        failing.join(timeout=10)
    assert statuses(conn, dag) == {"A": "failed", "B": "skipped"}
    row = conn.execute("SELECT status FROM job_runs WHERE id = %s", (after_b,)).fetchone()
    assert row == {"status": "skipped"}


def test_a_step_a_retry_lets_wait_again_is_skipped_by_a_failure_meanwhile(
    db_url: str, conn: Conn
) -> None:
    """D waits on A and B; B waits on X. A failed, so D was skipped. A is retried (D waits
    again, on A and B, whose row the retry holds so B cannot end unseen) while X fails: the
    failure waits for B's lock to skip B, then skips D too, which the retry made wait again
    during that wait, rather than leave D waiting for ever on a skipped B."""
    nodes = {name: NewRun("noop", max_retries=0) for name in "ABDX"}
    dag = dag_submission.submit_dag(conn, nodes, [("A", "D"), ("B", "D"), ("X", "B")])
    run_node(conn, dag, "A", FAILURE)
    other, failing = fail_in_thread(db_url, claim_node(conn, dag, "X"))
    with other:
        with conn.transaction():
            retried = transitions.retry(conn, dag.run_ids["A"])
            assert retried is not None and retried.unskipped == [dag.run_ids["D"]]
            failing.start()
            wait_until_blocked(conn, other.info.backend_pid)
        failing.join(timeout=10)
    assert statuses(conn, dag) == {"A": "pending", "B": "skipped", "D": "skipped", "X": "failed"}


def test_a_finish_that_rolls_back_hands_out_no_claimed_step(conn: Conn) -> None:
    dag = dag_submission.submit_dag(conn, {"A": NewRun("noop"), "B": NewRun("noop")}, [("A", "B")])
    done = claim_node(conn, dag, "A")
    claim = transitions.DownstreamClaim(limit=10, lease_seconds=30)
    bad = Finish(done.run_id, done.attempt, Outcome(OutcomeStatus.FAILED, error="x\x00y"))
    with pytest.raises(psycopg.Error):
        transitions.finish_many(conn, "w", [done, bad], claim_downstream=claim)
    assert claim.jobs == [] and claim.limit == 10
    assert statuses(conn, dag) == {"A": "running", "B": "blocked"}
