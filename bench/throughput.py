"""Queue benchmark: single and bulk submit rates, end-to-end no-op throughput, latency.

    .venv/bin/python -m bench.throughput [--runs 20000] [--rounds 3] [--concurrency 1000]
        [--drain-runs 100000]

First lines: the machine's cores and a calibration figure (a plain server-side INSERT of
generated rows, no Sundial code), so figures from noisy or different machines compare as
ratios. Single submit is `Sundial.submit` called in sequence on one connection.

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
from app.client import Sundial
from app.runs import NewRun
from bench.bench_db import REPO, scratch_database

SUBMIT_BATCH = 5000
CALIBRATION_ROWS = 200_000


def connect(url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


def cores() -> str:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return f"{os.cpu_count()} cores" + (f" ({usable} usable)" if usable else "")


def calibration_rate(url: str) -> float:
    """Rows/s of one server-side INSERT ... SELECT generate_series into a plain table with
    a primary key: what this database server does on this machine, without Sundial."""
    with connect(url) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_calibration "
            "(id bigint PRIMARY KEY, label text NOT NULL, at timestamptz NOT NULL)"
        )
        conn.execute("TRUNCATE bench_calibration")
        started = time.perf_counter()
        conn.execute(
            "INSERT INTO bench_calibration SELECT g, 'row ' || g, now() "
            "FROM generate_series(1, %s) AS g",
            (CALIBRATION_ROWS,),
        )
        elapsed = time.perf_counter() - started
        conn.execute("DROP TABLE bench_calibration")
    return CALIBRATION_ROWS / elapsed


def single_submit_rate(url: str, total: int) -> float:
    """Runs/s of `Sundial.submit` called one after another on one connection."""
    with Sundial(url) as client:
        client.submit("noop")  # connect outside the timed part
        started = time.perf_counter()
        for _ in range(total):
            client.submit("noop")
        elapsed = time.perf_counter() - started
        client.conn.execute("TRUNCATE job_runs CASCADE")
    return total / elapsed


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


def steady_drain_line(url: str, total: int, rounds: int, concurrency: int) -> str:
    """The steady drain: `total` no-op runs, 2 worker processes, first start to last
    finish, with the load average at the end (the machine is shared with the database)."""
    rates = [drain_rate(url, total, 2, concurrency) for _ in range(rounds)]
    return (
        f"steady drain of {total:,} no-op runs, 2 worker processes: "
        f"{statistics.median(rates):,.0f} runs/s (median of {rounds}; all: "
        f"{', '.join(f'{r:,.0f}' for r in rates)}; load average {os.getloadavg()[0]:.1f})"
    )


def first_claim_ms(url: str) -> float:
    """From the moment a worker process is started to its first claim (the run's
    started_at), with one run already waiting; both instants from the database clock."""
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        run_id = runs.submit(conn, NewRun("noop")).id
        row = conn.execute("SELECT clock_timestamp() AS t").fetchone()
        assert row is not None
        told = row["t"]
        workers = start_workers(url, 1, 10)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                started = conn.execute(
                    "SELECT started_at AS t FROM job_runs WHERE id = %s AND started_at IS NOT NULL",
                    (run_id,),
                ).fetchone()
                if started:
                    return float((started["t"] - told).total_seconds() * 1000)
                time.sleep(0.005)
            raise RuntimeError("the worker claimed nothing within 60 s")
        finally:
            stop_workers(workers)


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
    parser.add_argument("--single-submits", type=int, default=5000)
    parser.add_argument(
        "--drain-runs", type=int, default=100_000, help="runs of the steady 2-worker drain"
    )
    args = parser.parse_args()
    with scratch_database("sundial_bench") as url:
        print(f"machine: {cores()}")
        calibration = [calibration_rate(url) for _ in range(args.rounds)]
        print(
            f"calibration, server-side INSERT of {CALIBRATION_ROWS:,} rows: "
            f"{statistics.median(calibration):,.0f} rows/s (median of {args.rounds})"
        )
        single = [single_submit_rate(url, args.single_submits) for _ in range(args.rounds)]
        print(
            f"single submit, sequential on one connection: {statistics.median(single):,.0f} "
            f"runs/s (median of {args.rounds}, {args.single_submits:,} submits each; all: "
            f"{', '.join(f'{r:,.0f}' for r in single)})"
        )
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
        print(steady_drain_line(url, args.drain_runs, args.rounds, args.concurrency))
        ready = [first_claim_ms(url) for _ in range(args.rounds)]
        print(
            f"worker start to first claim: {statistics.median(ready):,.0f} ms "
            f"(median of {args.rounds}; all: {', '.join(f'{r:,.0f}' for r in ready)})"
        )
        p50, p99 = idle_latency(url, args.latency_samples)
        print(
            f"enqueue->start latency, idle: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
            f"({args.latency_samples} single submits)"
        )


if __name__ == "__main__":
    main()
