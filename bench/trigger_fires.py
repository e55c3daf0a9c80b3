"""Trigger benchmark: materialise the top-of-hour fires of many schedules.

    .venv/bin/python -m bench.trigger_fires [--schedules 100000] [--rounds 3] [--batch 2000]
        [--connections 2] [--distinct]

Creates a scratch database (see `bench.bench_db`), bulk-inserts that many `0 * * * *`
schedules (each with its own job definition, across several time zones, default 60 s
spread, overlap skip) all due at the same top of the hour, then runs the trigger's
`run_once` in this process, with the clock set just after that hour, until nothing is due;
each round on a fresh scratch database. Prints the median time, the trigger's peak memory
(the process's peak RSS, and what it was before the first round), and checks that every
schedule got exactly one run and one ledger row and moved on to the next hour. The aim is
under 5 s and under 300 MB. First lines: the machine's cores and a calibration figure (see
`bench.machine`). With `--distinct`, every schedule gets a spread of its own (60 s plus its
number), so no two share a group of alike schedules: the trigger's worst case.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.core.config import Settings
from app.services.trigger import Trigger
from bench.bench_db import scratch_database
from bench.machine import describe

DEFAULT_SCHEDULES = 100_000
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney"]
TOP_OF_HOUR = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NOW = TOP_OF_HOUR + timedelta(seconds=5)


def connect(url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


def create_schedules(
    conn: psycopg.Connection[dict[str, Any]], count: int, distinct: bool = False
) -> None:
    """`count` hourly schedules and their job definitions, in two set-based statements;
    `distinct`: each with a spread of its own."""
    conn.execute(
        "INSERT INTO job_definitions (id, name, handler) "
        "SELECT md5('job' || i)::uuid, 'job-' || i, 'noop' FROM generate_series(1, %s) AS i",
        (count,),
    )
    conn.execute(
        "INSERT INTO schedules (id, job_id, name, cron, timezone, next_fire_time, created_at, "
        "spread_seconds) "
        "SELECT md5('schedule' || i)::uuid, md5('job' || i)::uuid, 'schedule-' || i, "
        "'0 * * * *', (%s::text[])[1 + i %% %s], %s, %s, CASE WHEN %s THEN 60 + i ELSE 60 END "
        "FROM generate_series(1, %s) AS i",
        (ZONES, len(ZONES), TOP_OF_HOUR, TOP_OF_HOUR - timedelta(hours=1), distinct, count),
    )
    conn.execute("VACUUM ANALYZE schedules")
    conn.execute("VACUUM ANALYZE job_definitions")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


@dataclass(frozen=True)
class Round:
    seconds: float
    ticks: int
    ok: bool
    checks: dict[str, Any]


def one_round(settings: Settings, count: int, distinct: bool = False) -> Round:
    """Fire the top of the hour of `count` fresh schedules; check every one fired once."""
    with scratch_database("sundial_bench_trigger") as url, connect(url) as conn:
        create_schedules(conn, count, distinct)
        trigger = Trigger(settings, url=url)
        started = time.perf_counter()
        ticks = planned = 0
        while True:
            report = trigger.run_once(conn, now=NOW)
            ticks += 1
            planned += report.schedules
            if report.schedules == 0:
                break
        elapsed = time.perf_counter() - started
        checks = conn.execute(
            "SELECT (SELECT count(*) FROM job_runs) AS runs, "
            "(SELECT count(DISTINCT schedule_id) FROM job_runs) AS schedules_with_runs, "
            "(SELECT count(*) FROM schedule_fires WHERE outcome = 'enqueued') AS ledger, "
            "(SELECT count(*) FROM schedules WHERE next_fire_time = %s) AS advanced, "
            "(SELECT max(n) FROM (SELECT count(*) AS n FROM job_runs "
            "  GROUP BY date_trunc('second', run_at)) s) AS busiest_second, "
            "(SELECT extract(epoch FROM max(run_at) - min(run_at)) FROM job_runs) AS spread",
            (TOP_OF_HOUR + timedelta(hours=1),),
        ).fetchone()
    assert checks is not None
    ok = (
        checks["runs"] == count
        and checks["schedules_with_runs"] == count
        and checks["ledger"] == count
        and checks["advanced"] == count
        and planned == count
    )
    return Round(elapsed, ticks, ok, checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=DEFAULT_SCHEDULES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=None, help="schedules per transaction")
    parser.add_argument(
        "--connections", type=int, default=None, help="connections firing batches at once"
    )
    parser.add_argument(
        "--distinct", action="store_true", help="every schedule alone in its group (own spread)"
    )
    options = parser.parse_args(argv)
    settings = Settings.from_env({})
    if options.batch:
        settings = dataclasses.replace(settings, trigger_batch_size=options.batch)
    if options.connections:
        settings = dataclasses.replace(settings, trigger_connections=options.connections)

    n = options.schedules
    with scratch_database("sundial_bench_trigger") as url:
        print("\n".join(describe(url, options.rounds)))
    rss_before = peak_rss_mb()
    rounds = [one_round(settings, n, options.distinct) for _ in range(options.rounds)]
    rss_after = peak_rss_mb()
    median = statistics.median(r.seconds for r in rounds)
    each = ", ".join(f"{r.seconds:.2f}" for r in rounds)
    last = rounds[-1].checks
    alike = "each with a spread of its own" if options.distinct else "60 s spread"
    print(f"schedules:            {n:,} x '0 * * * *' in {len(ZONES)} time zones, {alike}")
    print(
        f"batch size:           {settings.trigger_batch_size} schedules per transaction, "
        f"{settings.trigger_connections} connection(s)"
    )
    print(f"fires materialised:   {last['runs']:,} runs, {last['ledger']:,} ledger rows")
    print(
        f"time:                 {median:.2f} s median of {len(rounds)} ({each}); "
        f"{n / median:,.0f} fires/s"
    )
    print(f"peak memory:          {rss_after:.0f} MB RSS ({rss_before:.0f} MB before the trigger)")
    print(
        f"spread:               run_at over {last['spread']:.1f} s, "
        f"at most {last['busiest_second']:,} runs in one second"
    )
    ok = all(r.ok for r in rounds)
    print(
        "check:                "
        + ("every schedule fired once and moved to the next hour" if ok else "FAILED")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
