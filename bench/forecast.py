"""Load forecast and week calendar benchmark: how long `forecast_with` and `week` take
over many active schedules.

    .venv/bin/python -m bench.forecast [--schedules 10000] [--rounds 3]

Creates a scratch database (see `bench.bench_db`) and bulk-inserts a mix that looks like a
real fleet: 70 % cron schedules (hourly, every 5 and 15 minutes, weekdays at 09:00, and a
daily time that differs per schedule, across five zones) and 30 % interval schedules
(every 5 to 60 minutes, each with its own anchor, so none share a computation). Then it
adds the worst case on top, in a second database: every schedule an every-minute interval
with its own anchor (1,440 fires each). Prints the median time of each read.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.scheduling import upcoming
from bench.bench_db import scratch_database

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney"]
CRONS = ["0 * * * *", "*/5 * * * *", "*/15 * * * *", "0 9 * * 1-5"]

Conn = psycopg.Connection[dict[str, Any]]


def create_mix(conn: Conn, count: int) -> None:
    """`count` schedules, one job definition, in set-based statements."""
    conn.execute(
        "INSERT INTO job_definitions (id, name, handler) VALUES (md5('job')::uuid, 'job', 'noop')"
    )
    conn.execute(
        "INSERT INTO schedules (id, job_id, name, cron, interval_seconds, timezone, "
        "next_fire_time, created_at) "
        "SELECT md5('s' || i)::uuid, md5('job')::uuid, 's-' || i, "
        "CASE WHEN i %% 10 < 4 THEN (%s::text[])[1 + i %% 4] "
        "     WHEN i %% 10 < 7 THEN (i %% 60) || ' ' || (i / 60 %% 24) || ' * * *' END, "
        "CASE WHEN i %% 10 >= 7 THEN 300 * (1 + i %% 12) END, "
        "(%s::text[])[1 + i %% 5], %s, %s - make_interval(secs => i) "
        "FROM generate_series(1, %s) AS i",
        (CRONS, ZONES, NOW + timedelta(minutes=1), NOW, count),
    )
    conn.execute("VACUUM ANALYZE schedules")


def create_worst(conn: Conn, count: int) -> None:
    conn.execute(
        "INSERT INTO job_definitions (id, name, handler) VALUES (md5('job')::uuid, 'job', 'noop')"
    )
    conn.execute(
        "INSERT INTO schedules (id, job_id, name, interval_seconds, next_fire_time, created_at) "
        "SELECT md5('s' || i)::uuid, md5('job')::uuid, 's-' || i, 60, %s, "
        "%s - make_interval(secs => i) FROM generate_series(1, %s) AS i",
        (NOW + timedelta(minutes=1), NOW, count),
    )
    conn.execute("VACUUM ANALYZE schedules")


def median_ms(rounds: int, read: Callable[[], Any]) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(url: str, label: str, count: int, rounds: int) -> None:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        forecast_ms = median_ms(rounds, lambda: upcoming.forecast_with(conn, now=NOW))
        fc = upcoming.forecast_with(conn, now=NOW)
        week_ms = median_ms(rounds, lambda: upcoming.week(conn, now=NOW))
    print(f"{label}, {count} schedules: 24-hour forecast {forecast_ms:.0f} ms "
          f"({fc.total} fires), week calendar {week_ms:.0f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for label, create in (("mixed fleet", create_mix), ("worst case", create_worst)):
        with scratch_database("bench_forecast") as url:
            with psycopg.connect(url, autocommit=True) as conn:
                create(conn, args.schedules)  # type: ignore[arg-type]
            measure(url, label, args.schedules, args.rounds)


if __name__ == "__main__":
    main()
