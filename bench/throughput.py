"""Queue benchmark: bulk submit rate, end-to-end no-op throughput, enqueue->start latency.

    .venv/bin/python -m bench.throughput [--runs 20000] [--rounds 3] [--concurrency 1000]

Every figure keeps every guarantee: runs are claimed with leases, finished with fenced
conditional updates, and each attempt is recorded in the history table. Throughput is
measured from the database's own timestamps (first start to last finish of a drain of
pre-submitted runs), so worker start-up is not counted. Medians over rounds are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app import runs
from app.runs import NewRun
from bench.bench_db import REPO, scratch_database

SUBMIT_BATCH = 5000


def connect(url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


def bulk_submit_rate(url: str, total: int) -> float:
    with connect(url) as conn:
        started = time.perf_counter()
        for offset in range(0, total, SUBMIT_BATCH):
            count = min(SUBMIT_BATCH, total - offset)
            runs.submit_many(conn, [NewRun("noop") for _ in range(count)])
        elapsed = time.perf_counter() - started
        conn.execute("TRUNCATE job_runs CASCADE")
    return total / elapsed


def start_workers(url: str, count: int, concurrency: int) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SUNDIAL_LOG_LEVEL": "WARNING",
        "SUNDIAL_POLL_SECONDS": "0.5",
    }
    return [
        subprocess.Popen(
            [sys.executable, "-m", "app.cli", "worker", "--concurrency", str(concurrency)],
            env=env,
            cwd=REPO,
        )
        for _ in range(count)
    ]


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for w in workers:
        w.terminate()
    for w in workers:
        w.wait(30)


def wait_for_workers(conn: psycopg.Connection[dict[str, Any]], count: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = conn.execute("SELECT count(*) AS n FROM workers WHERE stopped_at IS NULL").fetchone()
        if row and row["n"] >= count:
            return
        time.sleep(0.05)
    raise RuntimeError("workers did not start")


def drain_rate(url: str, total: int, worker_count: int, concurrency: int) -> float:
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        for offset in range(0, total, SUBMIT_BATCH):
            runs.submit_many(
                conn, [NewRun("noop") for _ in range(min(SUBMIT_BATCH, total - offset))]
            )
        workers = start_workers(url, worker_count, concurrency)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT count(*) AS n FROM job_runs WHERE status = 'completed'"
                ).fetchone()
                if row and row["n"] >= total:
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError("drain did not finish within 300 s")
        finally:
            stop_workers(workers)
        span = conn.execute(
            "SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 AS s "
            "FROM job_runs"
        ).fetchone()
        assert span is not None
        return total / float(span["s"])


def idle_latency(url: str, samples: int) -> tuple[float, float]:
    """started_at - created_at of single submits to one idle worker, in ms (p50, p99)."""
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        workers = start_workers(url, 1, 10)
        try:
            wait_for_workers(conn, 1)
            time.sleep(1.0)
            ids = []
            for _ in range(samples):
                ids.append(runs.submit(conn, NewRun("noop")).id)
                time.sleep(0.02)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT count(*) AS n FROM job_runs WHERE status = 'completed'"
                ).fetchone()
                if row and row["n"] >= samples:
                    break
                time.sleep(0.05)
        finally:
            stop_workers(workers)
        rows = conn.execute(
            "SELECT extract(epoch FROM started_at - created_at)::float8 * 1000 AS ms "
            "FROM job_runs WHERE id = ANY(%s)",
            (ids,),
        ).fetchall()
    latencies = sorted(float(r["ms"]) for r in rows)
    p99_index = min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))
    return statistics.median(latencies), latencies[p99_index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--latency-samples", type=int, default=200)
    args = parser.parse_args()
    with scratch_database("sundial_bench") as url:
        submit = [bulk_submit_rate(url, args.runs) for _ in range(args.rounds)]
        print(f"bulk submit: {statistics.median(submit):,.0f} runs/s (median of {args.rounds})")
        for worker_count in (1, 2):
            rates = [
                drain_rate(url, args.runs, worker_count, args.concurrency)
                for _ in range(args.rounds)
            ]
            print(
                f"end-to-end no-op, {worker_count} worker process(es): "
                f"{statistics.median(rates):,.0f} runs/s (median of {args.rounds}, "
                f"drain of {args.runs:,}; all: {', '.join(f'{r:,.0f}' for r in rates)})"
            )
        p50, p99 = idle_latency(url, args.latency_samples)
        print(
            f"enqueue->start latency, idle: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
            f"({args.latency_samples} single submits)"
        )


if __name__ == "__main__":
    main()
