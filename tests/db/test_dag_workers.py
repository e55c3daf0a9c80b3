"""DAGs executed by real worker processes: order, data between steps, crashes."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.dags import dag_submission
from app.runs import submission
from app.runs.run_inserts import NewRun
from tests.helpers.processes import query, run_row, services, status_counts, wait_until


def submit_dag(
    db_url: str, nodes: dict[str, NewRun], edges: list[tuple[str, str]]
) -> dag_submission.SubmittedDag:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return dag_submission.submit_dag(conn, nodes, edges)


def steps(*names: str, sleep: float = 0.05, **options: Any) -> dict[str, NewRun]:
    return {n: NewRun("step", {"name": n, "sleep": sleep}, **options) for n in names}


def completed(db_url: str) -> int:
    return status_counts(db_url).get("completed", 0)


def assert_dependency_order(
    db_url: str, dag: dag_submission.SubmittedDag, edges: list[tuple[str, str]]
) -> None:
    rows = {
        r["id"]: r for r in query(db_url, "SELECT * FROM job_runs WHERE dag_run_id = %s", dag.id)
    }
    for upstream, downstream in edges:
        up, down = rows[dag.run_ids[upstream]], rows[dag.run_ids[downstream]]
        assert down["started_at"] >= up["finished_at"], (
            f"{downstream} started before {upstream} ended"
        )


def test_diamond_and_fan_out_fan_in_complete_in_dependency_order(
    db_url: str, tmp_path: Path
) -> None:
    diamond_edges = [("extract", "t1"), ("extract", "t2"), ("t1", "load"), ("t2", "load")]
    fan = [("extract", f"t{i}") for i in range(1, 4)] + [(f"t{i}", "load") for i in range(1, 4)]
    fan += [("load", "notify")]
    diamond = submit_dag(db_url, steps("extract", "t1", "t2", "load"), diamond_edges)
    pipeline = submit_dag(db_url, steps("extract", "t1", "t2", "t3", "load", "notify"), fan)
    with services(db_url, tmp_path) as start:
        worker = start("worker", "--concurrency", "8")
        wait_until(lambda: status_counts(db_url) == {"completed": 10}, "both DAGs", 60, worker)
    assert_dependency_order(db_url, diamond, diamond_edges)
    assert_dependency_order(db_url, pipeline, fan)
    load = run_row(db_url, pipeline.run_ids["load"])
    # each step reads its upstreams' results by step name
    assert set(load["result"]["upstream"]) == {"t1", "t2", "t3"}
    assert load["result"]["upstream"]["t2"]["name"] == "t2"


def test_upstream_failure_skips_dependents_with_real_workers(db_url: str, tmp_path: Path) -> None:
    nodes = steps("a", "c", "d") | {"b": NewRun("fail", max_retries=0)}
    dag = submit_dag(db_url, nodes, [("a", "b"), ("b", "c"), ("a", "d")])
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: status_counts(db_url).get("completed") == 2, "a and d", 30, worker)
        wait_until(
            lambda: run_row(db_url, dag.run_ids["c"])["status"] == "skipped", "c skipped", 30
        )
    assert run_row(db_url, dag.run_ids["b"])["status"] == "failed"


def test_worker_crashes_never_leave_a_dependent_blocked(db_url: str, tmp_path: Path) -> None:
    """kill -9 at random moments, including right after an upstream's completion."""
    chain = [f"s{i}" for i in range(12)]
    edges = list(itertools.pairwise(chain))
    fan_nodes = [f"f{i}" for i in range(10)]
    fan_edges = [("s0", f) for f in fan_nodes] + [(f, chain[-1]) for f in fan_nodes]
    dag = submit_dag(
        db_url, steps(*chain, *fan_nodes, sleep=0.1, max_retries=20), edges + fan_edges
    )
    total = len(dag.run_ids)
    rand = random.Random(11)
    with services(db_url, tmp_path) as start:
        start("reaper")
        while (done := completed(db_url)) < total:
            worker = start("worker", "--concurrency", "4")
            # Each worker runs until it has completed 1-3 more steps (so every kill follows
            # a completion closely, and the DAG always moves on), however slow the machine.
            worker.wait_for_log("worker started", timeout=60)
            target = min(done + rand.randint(1, 3), total)
            wait_until(
                lambda n=target: completed(db_url) >= n, f"{target} steps completed", 60, worker
            )
            worker.kill()
    assert status_counts(db_url) == {"completed": total}
    assert_dependency_order(db_url, dag, edges + fan_edges)


def test_oversized_result_fails_with_a_clear_error(db_url: str, tmp_path: Path) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        run_id = submission.submit(conn, NewRun("big_result", {"size": 100_000})).id
    with services(db_url, tmp_path) as start:
        worker = start("worker")
        wait_until(lambda: run_row(db_url, run_id)["status"] == "failed", "failed", 30, worker)
    row = run_row(db_url, run_id)
    assert "results are limited to 65,536 bytes" in row["last_error"]
    assert row["attempt"] == 1  # not retried: it would fail the same way
