"""The worker's statements that take attempts as arrays of ids keep looking them up by
primary key under a cached generic plan built on statistics saying nothing was running
(a burst after a quiet spell): psycopg prepares a statement after a few executions, and
PostgreSQL then settles on one plan for every later call."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from app.core.sql import query
from app.runs import queues, submission, transitions
from app.runs.run_inserts import NewRun

RUNNING = 300
HISTORY = 20_000  # a table of some size: on a tiny one any plan is a scan


def _attempts(conn: psycopg.Connection[Any]) -> tuple[list[int], list[int]]:
    rows = conn.execute("SELECT id, attempt FROM job_runs WHERE status = 'running' ORDER BY id")
    pairs = [(r["id"], r["attempt"]) for r in rows.fetchall()]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _params(name: str, ids: list[int], attempts: list[int]) -> dict[str, Any]:
    n = len(ids)
    common = {"worker": "w", "now": None, "ids": ids, "attempts": attempts}
    keyed = {**common, "attempts": json.dumps(dict(zip(map(str, ids), attempts, strict=True)))}
    if name == "run_heartbeat":
        return {**keyed, "lease_seconds": 30}
    if name == "run_held_check":
        return keyed
    if name == "run_complete_many":
        extra = {"results": "{}", "completed_before": [], "claim_limit": 0, "queue": "default"}
        return {**keyed, **extra, "lease_seconds": None}
    if name == "run_fail_many":
        failure = {"outcomes": ["failed"] * n, "errors": ["boom"] * n, "tracebacks": [None] * n}
        rest = {"retryable": [False] * n, "delays": [1.0] * n, "fingerprints": ["f"] * n}
        return {**common, **failure, **rest}
    assert name == "run_release_many"
    return common


def _generic_plan(url: str, name: str, ids: list[int], attempts: list[int]) -> str:
    """The plan PostgreSQL caches for statement `name` when it plans it once for all calls,
    explained for these attempts."""
    statement = query("runs", name)
    params = _params(name, ids, attempts)
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        # Prepared by running it for attempts no run is at: it changes nothing.
        conn.execute(statement, _params(name, ids, [a + 1 for a in attempts]), prepare=True)
        (prepared,) = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
        # psycopg numbers the parameters in order of first appearance
        order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
        values = sql.SQL(", ").join(sql.Literal(params[key]) for key in order)
        explain = sql.SQL("EXPLAIN (COSTS OFF) EXECUTE {}({})").format(
            sql.Identifier(prepared["name"]), values
        )
        return "\n".join(r["QUERY PLAN"] for r in conn.execute(explain).fetchall())


@pytest.mark.parametrize(
    "name",
    ["run_heartbeat", "run_held_check", "run_complete_many", "run_fail_many", "run_release_many"],
)
def test_attempts_sent_as_ids_drive_the_plan_whatever_the_statistics_say(
    db_url: str, conn: psycopg.Connection[Any], name: str
) -> None:
    submission.submit_many(conn, [NewRun("noop") for _ in range(RUNNING + HISTORY)])
    conn.execute("VACUUM ANALYZE job_runs")  # the statistics: nothing is running
    assert len(transitions.claim(conn, "w", RUNNING, 30)) == RUNNING
    ids, attempts = _attempts(conn)

    plan = _generic_plan(db_url, name, ids, attempts)

    # walking the lease index of running runs once per id sent is what this rules out
    assert "ix_job_runs_lease" not in plan, plan
    assert "job_runs_pkey" in plan, plan
    if name in KEYED_BY_ID:  # no join of the runs to the ids for the planner to misorder
        assert "Function Scan" not in plan, plan


KEYED_BY_ID = {"run_heartbeat", "run_held_check", "run_complete_many"}


def test_the_triggers_read_of_active_runs_walks_only_the_active_ones_under_a_generic_plan(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    """`schedule_active_runs` (run by the trigger for every batch, with its ids as one
    array) looks the schedules up in the partial index of active scheduled runs, never
    among a schedule's whole history, whatever plan PostgreSQL settles on."""
    schedule_ids = [str(uuid.uuid4()) for _ in range(20)]
    conn.execute(
        "INSERT INTO job_runs (schedule_id, fire_time, handler, status, run_at) "
        "SELECT (%s::uuid[])[1 + i %% 20], now() - i * interval '1 minute', 'noop', "
        "CASE WHEN i %% 1000 = 0 THEN 'pending' ELSE 'completed' END, now() "
        "FROM generate_series(1, %s) AS i",
        (schedule_ids, HISTORY),
    )
    conn.execute("VACUUM ANALYZE job_runs")
    statement = query("firing", "schedule_active_runs")
    ids = "{" + ",".join(schedule_ids) + "}"
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as planned:
        planned.execute("SET plan_cache_mode = force_generic_plan")
        planned.execute(statement, {"ids": ids}, prepare=True)
        (prepared,) = planned.execute("SELECT name FROM pg_prepared_statements").fetchall()
        explain = sql.SQL("EXPLAIN (COSTS OFF) EXECUTE {}({})").format(
            sql.Identifier(prepared["name"]), sql.Literal(ids)
        )
        plan = "\n".join(r["QUERY PLAN"] for r in planned.execute(explain).fetchall())
        active = planned.execute(statement, {"ids": ids}).fetchall()
    assert "ix_job_runs_schedule_active" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert sum(len(row["run_ids"]) for row in active) == HISTORY // 1000


def test_the_limited_claim_looks_each_keys_count_up_under_a_generic_plan(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    """`run_claim_limited` counts the running runs by key and, for each due run it
    reads, looks its key's count up: planned on statistics saying nothing runs, a join of
    the two became a nested loop of every due run against every key (60 ms a claim in a
    drain, not 10)."""
    queues.set_limits(conn, "default", actor="alice", key_field="c", key_max_running=2)
    submission.submit_many(conn, [NewRun("noop", {"c": f"k{i % 400}"}) for i in range(HISTORY)])
    conn.execute("VACUUM ANALYZE job_runs")  # the statistics: nothing is running
    assert len(transitions.claim(conn, "w", RUNNING, 30)) == RUNNING
    statement = query("runs", "run_claim_limited")
    params = {"queue": "default", "key_field": "c", "key_max_running": 2, "max_running": None,
              "ids": None, "now": None, "limit": 500, "scan": 675, "busy": False, "worker": "w2",
              "lease_seconds": 30.0}  # fmt: skip
    with psycopg.connect(db_url, row_factory=dict_row) as planned:
        planned.execute("SET plan_cache_mode = force_generic_plan")
        planned.execute(statement, {**params, "limit": 0}, prepare=True)  # claims nothing
        (prepared,) = planned.execute("SELECT name FROM pg_prepared_statements").fetchall()
        order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
        values = sql.SQL(", ").join(sql.Literal(params[key]) for key in order)
        explain = sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE {}({})").format(
            sql.Identifier(prepared["name"]), values
        )
        plan = "\n".join(r["QUERY PLAN"] for r in planned.execute(explain).fetchall())
        planned.rollback()
    assert not re.search(r"Join Filter: .*key", plan), plan
    # 300 keys run one run each: of the next 675 due runs, the first two of each key
    # that runs none, and the first of each other one (k0-k174 come a third time)
    claimed = re.search(r"Update on job_runs r \(actual time=\S+ rows=(\d+)", plan)
    assert claimed and int(claimed.group(1)) == 500, plan
