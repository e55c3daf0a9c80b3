"""What PostgreSQL allows for a drain: the worker's own claim and finish SQL, nothing else.

    .venv/bin/python -m bench.drain_ceiling [--runs 100000] [--processes 2] [--batch 1000]
        [--notify-cost]

Each process loops: claim a batch (`run_claim`, leases and fencing tokens as the worker
takes them), then complete it (`run_complete_many`, one history row per attempt), both
statements exactly as the worker sends them, until the queue is empty. No handler runs
and no Python worker machinery is involved, so the rate is the ceiling a worker's Python
side is measured against. Medians over rounds are printed, per batch size.

With `--notify-cost`, each round is a pair: the statements as sent, then the same with their
`pg_notify` calls taken out, and the pair's ratio. A transaction that notified takes one
instance-wide lock at commit (notifications keep commit order), so this is what the claim's
and the finish's one notification per statement cost concurrent committers.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import statistics
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.core.limits import DEFAULT_QUEUE
from app.core.sql import query
from app.runs import submission
from app.runs.run_inserts import NewRun
from bench.bench_db import scratch_database
from bench.machine import cores
from bench.throughput import SUBMIT_BATCH

LEASE_SECONDS = 30.0
_NOTIFY = re.compile(r"pg_notify\('\w+', '\w*'\)")


def _statement(name: str, notify: bool) -> str:
    """A statement of runs.sql as the worker sends it, or with its notifications replaced
    by NULL (the statement otherwise unchanged)."""
    sent = query("runs", name)
    return sent if notify else _NOTIFY.sub("NULL", sent)


def _drain(url: str, batch: int, name: str, go: Any, out: Any, notify: bool) -> None:
    """One process: claim and complete batches until none is left; puts runs completed."""
    claim, complete = _statement("run_claim", notify), _statement("run_complete_many", notify)
    done = 0
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        go.wait()
        while True:
            claimed = conn.execute(
                claim,  # type: ignore[arg-type]
                {
                    "worker": name,
                    "limit": batch,
                    "lease_seconds": LEASE_SECONDS,
                    "busy": False,
                    "queue": DEFAULT_QUEUE,
                    "now": None,
                },
            ).fetchall()
            if not claimed:
                out.put(done)
                return
            # One statement on its own, as the worker sends it (app.runs.transitions.finish_many).
            rows = conn.execute(
                complete,  # type: ignore[arg-type]
                {
                    "worker": name,
                    "ids": "{" + ",".join(str(r["id"]) for r in claimed) + "}",
                    "attempts": "{"
                    + ",".join(f'"{r["id"]}":{r["attempt"]}' for r in claimed)
                    + "}",
                    "results": "{}",  # no-op runs have no result
                    "completed_before": "{}",
                    "claim_limit": 0,
                    "queue": DEFAULT_QUEUE,
                    "lease_seconds": None,
                    "now": None,
                },
            ).fetchall()
            done += len(rows)


def drain_rate(url: str, total: int, processes: int, batch: int, notify: bool = True) -> float:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("TRUNCATE job_runs CASCADE")
        for offset in range(0, total, SUBMIT_BATCH):
            count = min(SUBMIT_BATCH, total - offset)
            submission.submit_many(conn, [NewRun("noop") for _ in range(count)])
        conn.execute("VACUUM ANALYZE job_runs")
        ctx = multiprocessing.get_context("spawn")
        go, out = ctx.Event(), ctx.Queue()
        procs = [
            ctx.Process(target=_drain, args=(url, batch, f"ceiling-{n}", go, out, notify))
            for n in range(processes)
        ]
        for proc in procs:
            proc.start()
        time.sleep(1.0)  # let every process connect
        started = time.perf_counter()
        go.set()
        done = sum(out.get(timeout=600) for _ in procs)  # a failed process puts nothing
        elapsed = time.perf_counter() - started
        for proc in procs:
            proc.join()
    assert done == total, f"completed {done} of {total}"
    return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--batch", default="1000", help="claim batch sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--notify-cost", action="store_true", help="pair with and without NOTIFY")
    args = parser.parse_args()
    print(f"machine: {cores()}, load average {os.getloadavg()[0]:.1f}")
    with scratch_database("sundial_ceiling") as url:
        for batch in (int(b) for b in args.batch.split(",")):
            if args.notify_cost:
                print(_notify_cost_line(url, args.runs, args.processes, batch, args.rounds))
                continue
            rates = [drain_rate(url, args.runs, args.processes, batch) for _ in range(args.rounds)]
            print(
                f"claim + complete SQL only, {args.processes} processes, batch {batch}: "
                f"{statistics.median(rates):,.0f} runs/s (median of {args.rounds}, drain of "
                f"{args.runs:,}; all: {', '.join(f'{r:,.0f}' for r in rates)})",
                flush=True,
            )


def _notify_cost_line(url: str, runs: int, processes: int, batch: int, rounds: int) -> str:
    pairs = [
        (drain_rate(url, runs, processes, batch), drain_rate(url, runs, processes, batch, False))
        for _ in range(rounds)
    ]
    ratios = sorted(with_ / without for with_, without in pairs)
    return (
        f"claim + complete, {processes} processes, batch {batch}: with NOTIFY "
        f"{statistics.median(p[0] for p in pairs):,.0f} runs/s, without "
        f"{statistics.median(p[1] for p in pairs):,.0f} runs/s; paired ratio median "
        f"{statistics.median(ratios):.2f} (all: {', '.join(f'{r:.2f}' for r in ratios)})"
    )


if __name__ == "__main__":
    main()
