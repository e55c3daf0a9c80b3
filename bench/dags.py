"""DAG benchmark: submit a 1,000-node DAG in one call and run it to completion.

    .venv/bin/python -m bench.dags [--nodes 1000] [--rounds 3]

Two shapes: `wide` (one root, 998 parallel steps, one sink) and `deep` (a chain). Steps are
no-ops, so everything measured beyond zero is Sundial's own overhead: submit time, and the
span from the first step's start to the last step's finish (for the chain, divided by its
length: the cost of releasing and starting one dependent step). Medians over rounds. Each
round starts from emptied tables and refreshes their statistics after the submit, as
autovacuum keeps them in a running database. First lines: the machine's cores and a
calibration figure (see `bench.machine`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from itertools import pairwise

import psycopg
from psycopg.rows import dict_row

from app.dags import dag_submission
from app.runs.run_inserts import NewRun
from bench.bench_db import scratch_database
from bench.machine import describe
from bench.throughput import start_workers, stop_workers, wait_for_workers


def shape(kind: str, size: int) -> tuple[dict[str, NewRun], list[tuple[str, str]]]:
    names = [f"n{i}" for i in range(size)]
    nodes = {name: NewRun("noop") for name in names}
    if kind == "deep":
        return nodes, list(pairwise(names))
    root, middle, sink = names[0], names[1:-1], names[-1]
    return nodes, [(root, m) for m in middle] + [(m, sink) for m in middle]


def one_round(url: str, kind: str, size: int) -> tuple[float, float]:
    """(submit seconds, first start -> last finish seconds)."""
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("TRUNCATE job_runs, job_run_deps, job_run_attempts")
        nodes, edges = shape(kind, size)
        started = time.perf_counter()
        dag = dag_submission.submit_dag(conn, nodes, edges)
        submit_seconds = time.perf_counter() - started
        # Statistics as autovacuum keeps them in a running database: after the TRUNCATE
        # above the planner would think the tables empty and walk every blocked step.
        conn.execute("ANALYZE job_runs, job_run_deps")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) AS n FROM job_runs WHERE dag_run_id = %s AND status = 'completed'",
                (dag.id,),
            ).fetchone()
            if row and row["n"] == size:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError(f"{kind} DAG did not complete within 300 s")
        span = conn.execute(
            "SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 AS s "
            "FROM job_runs WHERE dag_run_id = %s",
            (dag.id,),
        ).fetchone()
        assert span is not None
        return submit_seconds, float(span["s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=100)
    args = parser.parse_args()
    with scratch_database("sundial_bench_dag") as url:
        print("\n".join(describe(url, args.rounds)))
        workers = start_workers(url, 1, args.concurrency)
        try:
            with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
                wait_for_workers(conn, 1)
            for kind in ("wide", "deep"):
                results = [one_round(url, kind, args.nodes) for _ in range(args.rounds)]
                submit = statistics.median(r[0] for r in results)
                span = statistics.median(r[1] for r in results)
                edges = args.nodes - 1 if kind == "deep" else 2 * (args.nodes - 2)
                line = (
                    f"{kind} DAG, {args.nodes:,} no-op nodes, {edges:,} edges: "
                    f"submit {submit * 1000:.0f} ms (one call), "
                    f"overhead first start -> last finish {span:.2f} s"
                )
                if kind == "deep":
                    line += f" ({span / (args.nodes - 1) * 1000:.2f} ms per dependent step)"
                print(line + f" (median of {args.rounds})")
        finally:
            stop_workers(workers)


if __name__ == "__main__":
    main()
