"""/metrics benchmark: one reading of the fleet's figures with a large history.

    .venv/bin/python -m bench.metrics [--runs 1000000] [--rounds 20]

Fills a scratch database with `--runs` finished runs (finished long ago, as a busy
deployment's history is), a recent hour of finished runs, a queue of pending runs, attempt
history with lost attempts and fire-ledger rows; then times `app.observability.metrics.read_fleet`
(what one uncached scrape of /metrics costs), prints each statement's median, and checks that
no statement of app/core/sql/metrics.sql scans job_runs, job_run_attempts or schedule_fires
sequentially.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg
from psycopg.rows import dict_row

from app.core.sql import load
from app.observability import lag_slo, metrics
from bench.bench_db import scratch_database

SCANNED = ("job_runs", "job_run_attempts", "schedule_fires")
WINDOW_SECONDS = 300.0
NATURAL_PLANS_FROM = 100_000  # runs; below, plans are checked with sequential scans off
PARAMS = {
    "now": None,
    "window_seconds": WINDOW_SECONDS,
    "lag_bounds": list(metrics.LAG_BOUNDS),
    "attempt_bounds": list(metrics.ATTEMPT_BOUNDS),
    "live_seconds": metrics.WORKER_LIVE_SECONDS,
}


def fill(conn: psycopg.Connection[dict[str, object]], total: int) -> None:
    recent, pending = max(total // 100, 10), max(total // 1000, 10)
    old = total - recent - pending
    conn.execute(
        "INSERT INTO job_runs (handler, status, attempt, run_at, started_at, finished_at) "
        "SELECT 'h' || (i %% 20), (ARRAY['completed','failed','cancelled'])[1 + i %% 3], 1, "
        "now() - interval '30 days', now() - interval '30 days', "
        "now() - interval '30 days' + i * interval '1 ms' "
        "FROM generate_series(1, %s) AS i",
        (old,),
    )
    conn.execute(
        "INSERT INTO job_runs (handler, status, attempt, run_at, started_at, finished_at) "
        "SELECT 'h' || (i %% 20), 'completed', 1 + i %% 3, now() - interval '70 s', "
        "now() - interval '69 s', now() - (i %% 3600) * interval '1 s' "
        "FROM generate_series(1, %s) AS i",
        (recent,),
    )
    conn.execute(
        "INSERT INTO job_runs (handler, status, priority, run_at) "
        "SELECT 'h' || (i %% 20), 'pending', i %% 5, now() + (i %% 100 - 50) * interval '1 s' "
        "FROM generate_series(1, %s) AS i",
        (pending,),
    )
    conn.execute(
        "INSERT INTO job_run_attempts (run_id, attempt, outcome, finished_at) "
        "SELECT id, attempt, CASE WHEN id %% 1000 = 0 THEN 'lost' ELSE status END, finished_at "
        "FROM job_runs WHERE finished_at IS NOT NULL",
        (),
    )
    conn.execute(
        "INSERT INTO schedule_fires (schedule_id, fire_time, local_time, outcome) "
        "SELECT md5((i %% 500)::text)::uuid, now() - (%s - i) * interval '1 s', "
        "localtimestamp, "
        "(ARRAY['enqueued','skipped_overlap','paused'])[1 + i %% 3] "
        "FROM generate_series(1, %s) AS i",
        (recent * 10, recent * 10),
    )
    # What autosummarize does as page ranges fill in a running deployment.
    conn.execute("SELECT brin_summarize_new_values('ix_schedule_fires_fire_time_brin')")
    # What autovacuum does to a table that old: statistics, and the visibility map that
    # lets the lost-attempts count read its partial index alone.
    conn.execute("VACUUM (ANALYZE)")


def statement_times(conn: psycopg.Connection[dict[str, object]]) -> dict[str, float]:
    """Median milliseconds of each statement, for finding the one to make cheaper."""
    times = {}
    for name, statement in load("metrics").items():
        samples = []
        for _ in range(5):
            started = time.perf_counter()
            conn.execute(statement, PARAMS).fetchall()
            samples.append((time.perf_counter() - started) * 1000)
        times[name] = statistics.median(samples)
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        lag_slo.dead_man_firing(conn)
        samples.append((time.perf_counter() - started) * 1000)
    times["lag_slo.dead_man_firing"] = statistics.median(samples)
    return times


def check_plans(conn: psycopg.Connection[dict[str, object]]) -> list[str]:
    """Statements whose plan scans a big table sequentially."""
    offenders = []
    for name, statement in load("metrics").items():
        plan = conn.execute("EXPLAIN " + statement, PARAMS).fetchall()  # type: ignore[operator]
        text = "\n".join(str(next(iter(row.values()))) for row in plan)
        if any(f"Seq Scan on {table}" in text for table in SCANNED):
            offenders.append(f"{name}:\n{text}")
    return offenders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with scratch_database("bench_metrics") as url:
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            started = time.perf_counter()
            fill(conn, args.runs)
            print(f"filled {args.runs:,} runs in {time.perf_counter() - started:.1f}s")
            # A small table is rightly read whole; there, prove an index could serve instead.
            if args.runs < NATURAL_PLANS_FROM:
                conn.execute("SET enable_seqscan = off")
            offenders = check_plans(conn)
            conn.execute("RESET enable_seqscan")
            for offender in offenders:
                print(f"SEQUENTIAL SCAN in {offender}")
            timings = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                body = metrics.read_fleet(conn, WINDOW_SECONDS)
                timings.append((time.perf_counter() - started) * 1000)
            p50 = statistics.median(timings)
            print(
                f"/metrics reading with {args.runs:,} runs: p50 {p50:.1f} ms, "
                f"max {max(timings):.1f} ms ({len(body):,} bytes)"
            )
            for name, ms in statement_times(conn).items():
                print(f"  {name}: {ms:.1f} ms")
            if offenders:
                raise SystemExit(1)
            print("no sequential scan of runs, attempts or fires")


if __name__ == "__main__":
    main()
