"""A month of history underneath: dropping a day, claims and finishes, and the on-call pages.

Bulk-loads `--days` days x `--runs-per-day` ended runs (default 30 x 1,000,000, the
design's "30 days hot") with an attempt each straight into the day partitions of
`run_history` (each day built as a table, then attached, as a bulk load would), over the
hot tables of `bench.pages` (`--hot-runs`: the last week's live and recently ended runs).
A second database gets the same hot tables and no history. Then it prints:

- the time to drop the oldest day (`app.runs.history.drop_expired`), and the slowest claim
  of a loop of claim+finish on another connection meanwhile (a drop must block no claim);
- claim+finish throughput of `--drain-runs` no-op runs drained by 2 worker processes, rounds
  alternating between the empty and the full database, medians and their ratio;
- the on-call pages' p50/p95 over `--samples` requests on each database;
- how fast the reaper moves `--move-runs` ended runs (an attempt each) into history.

    python -m bench.history_scale                          # the full size (an hour to load)
    python -m bench.history_scale --days 2 --runs-per-day 2000 --hot-runs 2000 --drain-runs 500
    python -m bench.history_scale --keep                    # keep both databases, print them
    python -m bench.history_scale --full URL --empty URL    # measure loaded ones again
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from app.core import migrate
from app.handlers.jobs import Outcome
from app.runs import history, submission, transitions
from app.runs.run_inserts import NewRun
from bench import pages, throughput
from bench.bench_db import new_database, scratch_database
from bench.machine import describe

Conn = psycopg.Connection[dict[str, Any]]
DAY = timedelta(days=1)

# One day of ended runs, ids from %(first)s, spread over the day: the mix of bench.pages
# (3 % failed, 1 % timed out, 2 % cancelled, 1 % skipped, the rest completed).
DAY_OF_RUNS = """
INSERT INTO {table} (id, handler, job_id, schedule_id, status, priority, base_priority, run_at,
                     attempt, created_at, started_at, finished_at, last_error, args, history_at)
SELECT %(first)s + i, 'noop', md5('job' || (1 + i %% 10000))::uuid,
       CASE WHEN i %% 3 = 0 THEN md5('schedule' || (1 + i %% 10000))::uuid END,
       s.status, 1 + i %% 5, 1 + i %% 5, t.at, 1, t.at, t.at + interval '50 ms',
       t.at + interval '500 ms',
       CASE WHEN s.status IN ('failed', 'timed_out')
       THEN 'ConnectionError: host ' || (i %% 97) || ' refused' END,
       jsonb_build_object('customer_id', i %% 10000, 'order',
                          jsonb_build_object('region', (ARRAY['eu', 'us', 'apac'])[1 + i %% 3])),
       t.at + interval '500 ms'
FROM generate_series(0, %(runs)s - 1) AS i
CROSS JOIN LATERAL (SELECT %(day)s::timestamptz
    + (i::float8 / %(runs)s) * interval '23 hours 59 minutes' AS at) AS t
CROSS JOIN LATERAL (SELECT CASE
    WHEN i %% 100 < 3 THEN 'failed' WHEN i %% 100 = 3 THEN 'timed_out'
    WHEN i %% 100 IN (4, 5) THEN 'cancelled' WHEN i %% 100 = 6 THEN 'skipped'
    ELSE 'completed' END AS status) AS s
"""
DAY_OF_ATTEMPTS = """
INSERT INTO {table} (run_id, attempt, worker, outcome, started_at, finished_at, error, history_at)
SELECT id, 1, 'worker-' || (id %% 40), status, started_at, finished_at, last_error, history_at
FROM {runs} WHERE status NOT IN ('cancelled', 'skipped')
"""


def load_history(url: str, days: int, per_day: int) -> None:
    """`days` days of `per_day` runs, the newest ending yesterday, each day a table loaded
    then attached (its indexes built once, in bulk); ids below the hot table's."""
    today = datetime.now(UTC).date()
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        for n in range(days):
            day = today - (days - n) * DAY
            _load_day(conn, day, first=n * per_day + 1, runs=per_day)
        history.ensure_days(conn, (today - (days - n) * DAY for n in range(days)))
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('job_runs', 'id'), %s)", (days * per_day + 1,)
        )
        for table in ("run_history", "run_attempt_history"):
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
        total = conn.execute("SELECT pg_database_size(current_database()) AS b").fetchone()
        spent = time.monotonic() - started
        # As the reaper leaves finished days: vacuumed once, frozen and all-visible.
        settled = history.settle_days(
            conn, written_before=today, limit=len(history.HISTORY_TABLES) * days
        )
    assert total is not None
    print(f"loaded {days} days x {per_day:,} runs of history in {spent:.0f} s; "
          f"database {total['b'] / 2**30:.1f} GB; {len(settled)} finished days' partitions "
          f"vacuumed as the reaper does in {time.monotonic() - started - spent:.0f} s")  # fmt: skip


def _load_day(conn: Conn, day: date, *, first: int, runs: int) -> None:
    start = history.day_start(day)
    bounds = (sql.Literal(start), sql.Literal(start + DAY))
    for parent, hot, load in (
        ("run_history", "job_runs", DAY_OF_RUNS),
        ("run_attempt_history", "job_run_attempts", DAY_OF_ATTEMPTS),
    ):
        table = sql.Identifier(history.partition_name(parent, day))
        conn.execute(
            sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS, "
                    "history_at timestamptz NOT NULL)").format(table, sql.Identifier(hot))
        )  # fmt: skip
        runs_table = sql.Identifier(history.partition_name("run_history", day))
        conn.execute(
            sql.SQL(load).format(table=table, runs=runs_table),  # type: ignore[arg-type]
            {"first": first, "runs": runs, "day": start},
        )
        conn.execute(
            sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})").format(
                sql.Identifier(parent), table, *bounds
            )
        )


ENDED_HOT_RUNS = """
WITH runs AS (
    INSERT INTO job_runs (handler, status, attempt, run_at, created_at, started_at, finished_at,
                          args)
    SELECT 'noop', 'completed', 1, t.at, t.at, t.at, t.at + interval '1 s',
           jsonb_build_object('customer_id', i %% 10000)
    FROM generate_series(1, %(runs)s) AS i
    CROSS JOIN LATERAL (SELECT now() - interval '2 hours'
        + (i::float8 / %(runs)s) * interval '30 minutes' AS at) AS t
    RETURNING id, started_at, finished_at
)
INSERT INTO job_run_attempts (run_id, attempt, worker, outcome, started_at, finished_at)
SELECT id, 1, 'worker-1', 'completed', started_at, finished_at FROM runs
"""


def move_rate(url: str, runs: int) -> str:
    """How fast the reaper moves ended runs (with an attempt each) into history."""
    from app.core.config import Settings
    from app.services.reaper import Reaper

    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(ENDED_HOT_RUNS, {"runs": runs})  # type: ignore[arg-type]
        conn.execute("VACUUM ANALYZE job_runs")
        keeper = Reaper(Settings.from_env({}))
        began = time.perf_counter()
        moved = 0
        while (batch := keeper.move_to_history(conn).runs) > 0:
            moved += batch
        spent = time.perf_counter() - began
    return (f"moved {moved:,} ended runs with their attempts into history in {spent:.1f} s: "
            f"{moved / spent:,.0f} runs/s (the design's day ends 580 a second)")  # fmt: skip


def drop_while_claiming(url: str) -> str:
    """Drop the oldest day while another connection claims and finishes runs one at a time;
    the drop's time and the slowest claim+finish before and during it."""
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        submission.submit_many(conn, [NewRun("noop") for _ in range(20_000)])
        kept = history.days(conn)
        oldest = kept[0]
    stop = threading.Event()
    during = threading.Event()
    slowest = {"before": 0.0, "during": 0.0}

    def claim_loop() -> None:
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as claimer:
            while not stop.is_set():
                began = time.perf_counter()
                (job,) = transitions.claim(claimer, "bench", 1, 30)
                transitions.finish_many(claimer, "bench", [
                    transitions.Finish(job.run_id, job.attempt, Outcome.completed())
                ])  # fmt: skip
                spent = time.perf_counter() - began
                phase = "during" if during.is_set() else "before"
                slowest[phase] = max(slowest[phase], spent)

    claimer = threading.Thread(target=claim_loop)
    claimer.start()
    time.sleep(2.0)
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        during.set()
        began = time.perf_counter()
        dropped = history.drop_expired(conn, keep_since=oldest.day + DAY, limit=1)
        spent = time.perf_counter() - began
        time.sleep(0.5)
    stop.set()
    claimer.join()
    assert dropped.days == [oldest.day], dropped
    return (f"dropped the oldest day ({oldest.runs:,} runs, "
            f"{oldest.rows.get('run_attempt_history', 0):,} attempts, "
            f"{oldest.bytes / 2**20:,.0f} MB) in {spent * 1000:.0f} ms; slowest claim+finish "
            f"on another connection: {slowest['before'] * 1000:.1f} ms before, "
            f"{slowest['during'] * 1000:.1f} ms during")  # fmt: skip


def paired_drains(empty: str, full: str, runs: int, rounds: int) -> str:
    rates: dict[str, list[float]] = {"empty": [], "full": []}
    for _ in range(rounds):
        for name, url in (("empty", empty), ("full", full)):
            rates[name].append(throughput.drain_rate(url, runs, 2, 1000))
    med = {k: statistics.median(v) for k, v in rates.items()}
    return (f"claim+finish drain of {runs:,} no-op runs, 2 workers, {rounds} rounds alternating: "
            f"empty history {med['empty']:,.0f} runs/s, with the month {med['full']:,.0f} runs/s, "
            f"ratio {med['full'] / med['empty']:.2f} (all: "
            f"{', '.join(f'{r:,.0f}' for r in rates['empty'])} | "
            f"{', '.join(f'{r:,.0f}' for r in rates['full'])})")  # fmt: skip


@contextlib.contextmanager
def database(given: str | None, prefix: str, keep: bool) -> Iterator[tuple[str, bool]]:
    """A URL and whether it is new: the one given (brought up to date), or a scratch one."""
    if given:
        migrate.upgrade(given)
        yield given, False
    elif keep:
        yield new_database(prefix), True  # not dropped at the end
    else:
        with scratch_database(prefix) as url:
            yield url, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs-per-day", type=int, default=1_000_000)
    parser.add_argument("--hot-runs", type=int, default=200_000)
    parser.add_argument("--drain-runs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--move-runs", type=int, default=100_000)
    parser.add_argument("--full", help="a database already loaded by --keep (measure again)")
    parser.add_argument("--empty", help="its twin without history")
    parser.add_argument("--keep", action="store_true", help="keep the databases, print them")
    args = parser.parse_args(argv)
    with (
        database(args.full, "sundial_bench_history", args.keep) as (full, new_full),
        database(args.empty, "sundial_bench_nohistory", args.keep) as (empty, new_empty),
    ):
        print("\n".join(describe(empty, 1)))
        if args.keep:
            print(f"databases: --full {full} --empty {empty}")
        if new_full:  # first: the hot runs' ids follow the history's, as they would
            load_history(full, args.days, args.runs_per_day)
        for url, new in ((full, new_full), (empty, new_empty)):
            if new:
                pages.load(url, args.hot_runs, 1000)
        print("on-call pages with the month of history underneath:")
        pages.time_pages(full, args.samples)
        print("the same pages, no history:")
        pages.time_pages(empty, args.samples)
        print(paired_drains(empty, full, args.drain_runs, args.rounds))
        print(drop_while_claiming(full))
        print(move_rate(full, args.move_runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
