"""Worker memory: a worker's resident memory (RSS) at concurrency 10 and 1,000, and over a
long drain of no-op runs (RSS after every 100,000).

    .venv/bin/python -m bench.worker_memory [--runs 20000] [--long 300000] [--million]

`--million` drains 1,000,000 runs (a few minutes). The worker is a real `sundial worker`
process; RSS is read from /proc (Linux).
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

from app.runs import submission
from app.runs.run_inserts import NewRun
from bench.bench_db import scratch_database
from bench.machine import describe
from bench.throughput import (
    SUBMIT_BATCH,
    connect,
    start_workers,
    stop_workers,
    wait_completed,
    wait_for_workers,
)

EVERY = 100_000
LONG_DRAIN_CONCURRENCY = 1000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def submit_noops(url: str, total: int) -> None:
    with connect(url) as conn:
        for offset in range(0, total, SUBMIT_BATCH):
            count = min(SUBMIT_BATCH, total - offset)
            submission.submit_many(conn, [NewRun("noop") for _ in range(count)])


def drained(url: str, worker: subprocess.Popen[bytes], total: int) -> float:
    """Submit `total` no-op runs, wait until the worker has run them all, then forget
    them (so counting stays cheap); the worker's RSS once done, in MB."""
    submit_noops(url, total)
    with connect(url) as conn:
        wait_completed(conn, total, 600)
        time.sleep(0.5)  # the last finishes and log flushes
        mb = rss_mb(worker.pid)
        conn.execute("TRUNCATE job_runs CASCADE")
    return mb


def at_concurrency(url: str, concurrency: int, total: int) -> tuple[float, float]:
    """RSS (MB) of a freshly started worker, and after a drain of `total` runs."""
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        (worker,) = start_workers(url, 1, concurrency)
        try:
            wait_for_workers(conn, 1)
            time.sleep(0.5)
            started = rss_mb(worker.pid)
            return started, drained(url, worker, total)
        finally:
            stop_workers([worker])


def long_drain(url: str, total: int) -> None:
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        (worker,) = start_workers(url, 1, LONG_DRAIN_CONCURRENCY)
        try:
            wait_for_workers(conn, 1)
            time.sleep(0.5)
            print(f"  0 runs: {rss_mb(worker.pid):.1f} MB", flush=True)
            done = 0
            started = time.perf_counter()
            while done < total:
                chunk = min(EVERY, total - done)
                mb = drained(url, worker, chunk)
                done += chunk
                elapsed = time.perf_counter() - started
                print(f"  {done:,} runs: {mb:.1f} MB ({elapsed:.0f} s)", flush=True)
        finally:
            stop_workers([worker])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000, help="drain at each concurrency")
    parser.add_argument("--long", type=int, default=300_000, help="runs of the long drain")
    parser.add_argument("--million", action="store_true", help="a long drain of 1,000,000")
    args = parser.parse_args()
    total = 1_000_000 if args.million else args.long
    with scratch_database("sundial_bench") as url:
        for line in describe(url, 1):
            print(line)
        for concurrency in (10, 1000):
            started, after = at_concurrency(url, concurrency, args.runs)
            print(
                f"worker RSS at concurrency {concurrency:,}: {started:.1f} MB started, "
                f"{after:.1f} MB after a drain of {args.runs:,} no-op runs"
            )
        print(
            f"worker RSS over a drain of {total:,} no-op runs (concurrency "
            f"{LONG_DRAIN_CONCURRENCY:,}), every {EVERY:,}:"
        )
        long_drain(url, total)


if __name__ == "__main__":
    main()
