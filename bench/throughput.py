"""Queue benchmark: single and bulk submit rates, end-to-end no-op throughput, latency.

    .venv/bin/python -m bench.throughput [--runs 20000] [--rounds 3] [--concurrency 1000]
        [--drain-runs 100000] [--limit-keys 1000] [--per-key 1 2 5] [--limits-only]

First lines: the machine's cores and a calibration figure (a plain server-side INSERT of
generated rows, no Sundial code), so figures from noisy or different machines compare as
ratios. Single submit is `Sundial.submit` called in sequence on one connection.

Every figure keeps every guarantee: runs are claimed with leases, finished with fenced
conditional updates, and each attempt is recorded in the history table. Throughput is
measured from the database's own timestamps (first start to last finish of a drain of
pre-submitted runs), so worker start-up is not counted; a second figure times the drain from
the moment the worker processes are told to start. The cost of concurrency limits: drains of
`--drain-runs` runs over `--limit-keys` customers without and with a limit of 1, 2 and 5
running per customer (`--per-key`), in pairs, with the ratio of each pair.
Enqueue-to-handler latency is timed from just before `Sundial.submit` to the handler's first
line (`bench.handlers`, same machine, same clock), p50/p99 printed for every round. Medians
over rounds are printed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.client import Sundial
from app.runs import queues, submission
from app.runs.run_inserts import NewRun
from bench.bench_db import REPO, scratch_database
from bench.machine import describe

SUBMIT_BATCH = 5000


def connect(url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


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
            submission.submit_many(conn, [NewRun("noop") for _ in range(count)])
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
    """Ask every worker to stop; one that has not within a minute (a loaded machine) is
    killed, so no worker outlives the benchmark's scratch database."""
    for w in workers:
        w.terminate()
    for w in workers:
        try:
            w.wait(60)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()


def wait_for_workers(conn: psycopg.Connection[dict[str, Any]], count: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = conn.execute("SELECT count(*) AS n FROM workers WHERE stopped_at IS NULL").fetchone()
        if row and row["n"] >= count:
            return
        time.sleep(0.05)
    raise RuntimeError("workers did not start")


def drain_rate(
    url: str, total: int, worker_count: int, concurrency: int, keys: int | None = None
) -> float:
    """Runs/s of a drain of `total` pre-submitted no-op runs, first start to last finish;
    with `keys`, each run names one of that many customers in its args (in random order)."""
    chance = random.Random(total)
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        for offset in range(0, total, SUBMIT_BATCH):
            count = min(SUBMIT_BATCH, total - offset)
            new = [
                NewRun("noop", {"customer_id": f"c{chance.randrange(keys)}"} if keys else {})
                for _ in range(count)
            ]
            submission.submit_many(conn, new)
        workers = start_workers(url, worker_count, concurrency)
        try:
            wait_completed(conn, total, 300, poll=0.05)
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


def limits_lines(
    url: str, total: int, keys: int, per_key: int, rounds: int, concurrency: int
) -> list[str]:
    """The cost of a per-key limit: drains of `total` no-op runs over `keys` customers, 2
    worker processes, without limits and with at most `per_key` running per customer, in
    pairs (one of each per round, alternating which goes first)."""
    plain: list[float] = []
    limited: list[float] = []
    with connect(url) as conn:
        for i in range(rounds):
            for with_limit in (False, True) if i % 2 == 0 else (True, False):
                queues.set_limits(conn, "default", actor="bench",
                                  key_field="customer_id" if with_limit else None,
                                  key_max_running=per_key if with_limit else None)  # fmt: skip
                rate = drain_rate(url, total, 2, concurrency, keys=keys)
                (limited if with_limit else plain).append(rate)
        queues.set_limits(conn, "default", actor="bench")
    ratios = [b / a for a, b in zip(plain, limited, strict=True)]
    return [
        f"drain of {total:,} no-op runs over {keys:,} customers, 2 worker processes, no "
        f"limits: {statistics.median(plain):,.0f} runs/s (median of {rounds}; all: "
        f"{', '.join(f'{r:,.0f}' for r in plain)})",
        f"the same with at most {per_key} running per customer: "
        f"{statistics.median(limited):,.0f} "
        f"runs/s (all: {', '.join(f'{r:,.0f}' for r in limited)}); limited/plain per pair: "
        f"{', '.join(f'{r:.2f}' for r in ratios)}, median {statistics.median(ratios):.2f}",
    ]


def first_claim_ms(url: str) -> float:
    """From the moment a worker process is started to its first claim (the run's
    started_at), with one run already waiting; both instants from the database clock."""
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        run_id = submission.submit(conn, NewRun("noop")).id
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
                ids.append(submission.submit(conn, NewRun("noop")).id)
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


READY_ROUNDS_GAP_SECONDS = 0.02  # between single submits to an idle worker


def start_worker_with(url: str, concurrency: int, **env: str) -> subprocess.Popen[bytes]:
    """One worker process, as `start_workers` starts them, with extra environment."""
    settings = {"DATABASE_URL": url, "SUNDIAL_LOG_LEVEL": "WARNING", "SUNDIAL_POLL_SECONDS": "0.5"}
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "worker", "--concurrency", str(concurrency)],
        env={**os.environ, **settings, **env},
        cwd=REPO,
    )


def interpreter_floor_ms() -> float:
    """From starting `python -c 'import psycopg'` to its exit: what any worker process
    pays before its own start-up (an interpreter and the database driver)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import asyncio, psycopg"], check=True, cwd=REPO)
    return (time.perf_counter() - started) * 1000


def drain_from_start(url: str, total: int, worker_count: int, concurrency: int) -> float:
    """Runs/s of a drain of `total` pre-submitted runs, measured from the moment the
    worker processes are told to start (start-up included) to the last finish."""
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        for offset in range(0, total, SUBMIT_BATCH):
            submission.submit_many(
                conn, [NewRun("noop") for _ in range(min(SUBMIT_BATCH, total - offset))]
            )
        row = conn.execute("SELECT clock_timestamp() AS t").fetchone()
        assert row is not None
        told = row["t"]
        workers = start_workers(url, worker_count, concurrency)
        try:
            wait_completed(conn, total, 300)
        finally:
            stop_workers(workers)
        last = conn.execute("SELECT max(finished_at) AS t FROM job_runs").fetchone()
        assert last is not None
        return total / (last["t"] - told).total_seconds()


def wait_completed(
    conn: psycopg.Connection[dict[str, Any]], count: int, timeout: float, poll: float = 0.01
) -> None:
    """Until no run waits or runs, then check that all `count` completed. The wait asks
    for the first waiting or running run through their partial indexes: counting the
    completed ones, a scan of the table every poll, took a share of the database's time
    that grew with the drain's (a slow drain was slowed further by it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(
            # (in each index's order: a scan of the table would pass every ended run)
            "SELECT (SELECT id FROM job_runs WHERE status = 'pending'"
            "        ORDER BY queue, priority DESC, run_at LIMIT 1) IS NOT NULL"
            " OR (SELECT id FROM job_runs WHERE status = 'running'"
            "     ORDER BY lease_until LIMIT 1) IS NOT NULL AS busy"
        ).fetchone()
        if row and not row["busy"]:
            break
        time.sleep(poll)
    else:
        raise RuntimeError(f"{count} runs did not complete within {timeout:.0f} s")
    done = conn.execute("SELECT count(*) AS n FROM job_runs WHERE status = 'completed'").fetchone()
    if done is None or done["n"] != count:
        raise RuntimeError(f"{done['n'] if done else 0} of {count} runs completed")


def handler_latency_rounds(url: str, rounds: int, samples: int) -> list[tuple[float, float]]:
    """Enqueue-to-start latency as the handler sees it, on one idle worker: from just
    before `Sundial.submit` to the handler's first line (it returns `time.time()`), in ms;
    (p50, p99) of each round of `samples` submits."""
    results = []
    with connect(url) as conn, Sundial(url) as client:
        conn.execute("TRUNCATE job_runs, workers CASCADE")
        worker = start_worker_with(url, 10, SUNDIAL_HANDLERS="bench.handlers")
        try:
            wait_for_workers(conn, 1)
            client.submit("bench-stamp")  # connect, and let the worker claim once
            wait_completed(conn, 1, 60)
            for _ in range(rounds):
                conn.execute("TRUNCATE job_runs CASCADE")
                before: dict[int, float] = {}
                for _ in range(samples):
                    time.sleep(READY_ROUNDS_GAP_SECONDS)
                    submitted = time.time()
                    before[client.submit("bench-stamp")] = submitted
                wait_completed(conn, samples, 60)
                rows = conn.execute(
                    "SELECT id, (result #>> '{}')::float8 AS at FROM job_runs WHERE id = ANY(%s)",
                    (list(before),),
                ).fetchall()
                latencies = sorted((r["at"] - before[r["id"]]) * 1000 for r in rows)
                results.append((statistics.median(latencies), percentile(latencies, 0.99)))
        finally:
            stop_workers([worker])
    return results


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))]


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
    parser.add_argument(
        "--limits-only",
        action="store_true",
        help="only the paired drains without and with a per-key limit",
    )
    parser.add_argument("--limit-keys", type=int, default=1000, help="customers of those drains")
    parser.add_argument(
        "--per-key",
        type=int,
        nargs="+",
        default=[1, 2, 5],
        help="the limits per customer, each paired with drains without limits",
    )
    args = parser.parse_args()
    with scratch_database("sundial_bench") as url:
        print("\n".join(describe(url, args.rounds)))
        for per_key in args.per_key:
            limits = limits_lines(url, args.drain_runs, args.limit_keys, per_key, args.rounds,
                                  args.concurrency)  # fmt: skip
            print("\n".join(limits), flush=True)
        if args.limits_only:
            return
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
        floor = [interpreter_floor_ms() for _ in range(args.rounds)]
        print(
            f"interpreter floor (python + import psycopg, to exit): "
            f"{statistics.median(floor):,.0f} ms (median of {args.rounds}); worker start to "
            f"first claim beyond it: {statistics.median(ready) - statistics.median(floor):,.0f} ms"
        )
        for worker_count in (1, 2):
            told = [
                drain_from_start(url, args.runs, worker_count, args.concurrency)
                for _ in range(args.rounds)
            ]
            print(
                f"end-to-end no-op from the moment {worker_count} worker process(es) are told "
                f"to start: {statistics.median(told):,.0f} runs/s (median of {args.rounds}, "
                f"drain of {args.runs:,} with start-up; all: "
                f"{', '.join(f'{r:,.0f}' for r in told)})"
            )
        for i, (p50, p99) in enumerate(
            handler_latency_rounds(url, args.rounds, args.latency_samples), 1
        ):
            print(
                f"enqueue->handler latency, idle worker, round {i}: p50 {p50:.2f} ms, "
                f"p99 {p99:.2f} ms ({args.latency_samples} submits, submit call to the "
                "handler's first line)"
            )


if __name__ == "__main__":
    main()
