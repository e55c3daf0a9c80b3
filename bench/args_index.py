"""What the runs search's index on `job_runs.args` costs the hot path: bulk submit and a
drain of runs with args, without the index and with each way of building it, in rounds that
alternate the ways (the index dropped and made again between rounds), so each is measured
next to the others on the same machine and the same code.

    python -m bench.args_index                 # 50,000 runs, 3 rounds of every way
    python -m bench.args_index --runs 20000 --rounds 1

Ways: `none`; `all` (every run, pending list on: the default GIN); `ended, list` (ended
runs only, pending list on); `ended` (ended runs only, no pending list: what migration 0026
makes). Runs carry `{"customer_id": N, "order": {"region": "eu"}}` over 1,000 customers;
the drain is `bench.throughput`'s (2 worker processes, first start to last finish). Prints
every round, then per way the median rates and the median of its ratios to `none` in the
same round.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from app.runs import submission
from app.runs.run_inserts import NewRun
from bench.bench_db import scratch_database
from bench.machine import describe
from bench.throughput import SUBMIT_BATCH, connect, drain_rate

ENDED = "WHERE status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')"
WAYS = {
    "none": None,
    "all": "CREATE INDEX ix_job_runs_args ON job_runs USING gin (args jsonb_path_ops)",
    "ended, list": f"CREATE INDEX ix_job_runs_args ON job_runs USING gin (args jsonb_path_ops) "
    f"{ENDED}",
    "ended": "CREATE INDEX ix_job_runs_args ON job_runs USING gin (args jsonb_path_ops) "
    f"WITH (fastupdate = off) {ENDED}",
}


def use(url: str, way: str) -> None:
    with connect(url) as conn:
        conn.execute("TRUNCATE job_runs CASCADE")
        conn.execute("DROP INDEX IF EXISTS ix_job_runs_args")
        made = WAYS[way]
        if made:
            conn.execute(made)  # type: ignore[arg-type]


def submit_rate(url: str, total: int) -> float:
    chance = random.Random(total)
    with connect(url) as conn:
        started = time.perf_counter()
        for offset in range(0, total, SUBMIT_BATCH):
            count = min(SUBMIT_BATCH, total - offset)
            args = [{"customer_id": chance.randrange(1000), "order": {"region": "eu"}}
                    for _ in range(count)]  # fmt: skip
            submission.submit_many(conn, [NewRun("noop", a) for a in args])
        elapsed = time.perf_counter() - started
        conn.execute("TRUNCATE job_runs CASCADE")
    return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    found: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    with scratch_database("sundial_bench_args_index") as url:
        print("\n".join(describe(url, 1)))
        for n in range(args.rounds):
            ways = list(WAYS) if n % 2 == 0 else list(reversed(WAYS))
            for way in ways:
                use(url, way)
                submit = submit_rate(url, args.runs)
                drain = drain_rate(url, args.runs, 2, 1000, keys=1000)
                found[way].append((submit, drain))
                print(f"round {n + 1} {way:<12} submit {submit:8,.0f}/s  drain {drain:8,.0f}/s"
                      f"  load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    base = found["none"]
    for way, rounds in found.items():
        submits, drains = zip(*rounds, strict=True)
        ratios = [d / b[1] for (_, d), b in zip(rounds, base, strict=True)]
        each = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"{way:<12} submit {statistics.median(submits):8,.0f}/s  drain "
              f"{statistics.median(drains):8,.0f}/s  drain against none, per round: "
              f"{each} (median {statistics.median(ratios):.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
