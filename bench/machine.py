"""What the machine can do, printed first by every queue benchmark so that figures from
noisy or different machines compare as ratios: its cores, and a calibration figure (a
plain server-side INSERT of generated rows, no Sundial code)."""

from __future__ import annotations

import os
import statistics
import time

import psycopg

CALIBRATION_ROWS = 200_000


def cores() -> str:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return f"{os.cpu_count()} cores" + (f" ({usable} usable)" if usable else "")


def calibration_rate(url: str) -> float:
    """Rows/s of one server-side INSERT ... SELECT generate_series into a plain table with
    a primary key: what this database server does on this machine, without Sundial."""
    with psycopg.connect(url, autocommit=True) as conn:
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


def describe(url: str, rounds: int) -> list[str]:
    """The two first lines of a benchmark's output: cores, and the calibration median."""
    median = statistics.median(calibration_rate(url) for _ in range(rounds))
    return [
        f"machine: {cores()}",
        f"calibration, server-side INSERT of {CALIBRATION_ROWS:,} rows: "
        f"{median:,.0f} rows/s (median of {rounds})",
    ]
