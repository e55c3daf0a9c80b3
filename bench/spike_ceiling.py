"""`bench.seed_day --find-ceiling`: the highest spike rate the day's fleet holds with
schedule lag p99 under a bound (5 s), and what limits it.

    .venv/bin/python -m bench.seed_day --find-ceiling [--ceiling-start 2000]
        [--ceiling-tries 5] [--ceiling-p99 5] [--spread 10] [the day's fleet options]

The fleet of the day (workers, trigger, reaper, steady submitters, the pooler) starts once.
Each try makes `rate x --spread` hourly schedules whose fires the trigger spreads over
`--spread` seconds, a few seconds ahead, waits until those runs have started, and reads
schedule lag p50/p99 over every run due in the spike (steady ones too, as the SLO does).
A try that holds doubles the rate while none has failed yet, then the tries bisect
between the highest rate held and the lowest that failed. Each try prints its rate, lag
and the CPU share of the machine of each kind of process; the answer names the busiest.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.seed_day import (
    Fleet,
    _cpu_seconds,
    _postgres_pids,
    connect,
    create_spike_schedules,
    fleet_env,
    one,
    start_fleet,
    start_submitters,
)

LEAD_SECONDS = 5  # from making a try's schedules to its first fire
SETTLE_LIMIT_SECONDS = 60  # a try's runs that have not started by then count as waiting
RATE_STEP = 50  # tried rates are multiples of this


@dataclass(frozen=True)
class Try:
    rate: float
    runs: int
    p50: float
    p99: float
    cpu_shares: dict[str, float]  # process kind -> share of the machine
    machine_busy: float  # share of the machine busy, other tenants included

    def describe(self) -> str:
        shares = ", ".join(f"{kind} {share:.0%}" for kind, share in self.cpu_shares.items())
        return (
            f"spike {self.rate:,.0f} fires/s ({self.runs:,} runs due): lag p50 {self.p50:.2f} s, "
            f"p99 {self.p99:.2f} s; CPU of the machine: {shares}; "
            f"machine busy {self.machine_busy:.0%}"
        )


def _pids_named(name: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of every core since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


class CpuMeter:
    """CPU seconds of each kind of process of the benchmark, and of the whole machine."""

    def __init__(self, fleet: Fleet, workers: int) -> None:
        pids = [p.pid for p in fleet.processes]
        self.kinds = {
            "workers": pids[:workers],
            "trigger": pids[workers : workers + 1],
            "reaper": pids[workers + 1 : workers + 2],
            "submitters": pids[workers + 2 :],
        }

    def read(self) -> tuple[dict[str, float], tuple[int, int]]:
        seconds = {kind: _cpu_seconds(pids) for kind, pids in self.kinds.items()}
        seconds["database"] = _cpu_seconds(_postgres_pids())
        seconds["pgbouncer"] = _cpu_seconds(_pids_named("pgbouncer"))
        return seconds, _machine_ticks()


def spike_lag(
    conn: psycopg.Connection[dict[str, Any]], start: Any, end: Any
) -> tuple[int, float, float]:
    """Runs due in [start, end) and their lag p50/p99, the unstarted ones at their wait
    so far."""
    row = conn.execute(
        "WITH due AS (SELECT extract(epoch FROM coalesce(started_at, now()) - run_at) AS lag "
        "FROM job_runs WHERE run_at >= %(start)s AND run_at < %(end)s) "
        "SELECT count(*) AS runs, "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50, "
        "percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99 FROM due",
        {"start": start, "end": end},
    ).fetchone()
    assert row is not None
    return row["runs"], float(row["p50"] or 0), float(row["p99"] or 0)


def settle(conn: psycopg.Connection[dict[str, Any]], limit: float) -> None:
    """Wait (up to `limit` seconds) until nothing due waits to start."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        due = "SELECT count(*) AS v FROM job_runs WHERE status = 'pending' AND run_at <= now()"
        if one(conn, due) == 0:
            return
        time.sleep(0.5)


def try_spike(
    conn: psycopg.Connection[dict[str, Any]], args: argparse.Namespace, meter: CpuMeter,
    rate: float, tag: str,
) -> Try:  # fmt: skip
    settle(conn, SETTLE_LIMIT_SECONDS)  # the try before it has ended
    time.sleep(args.median_seconds)  # and most of its runs too
    count = int(rate * args.spread)
    fire_at = one(conn, "SELECT now() AS v") + timedelta(seconds=LEAD_SECONDS)
    create_spike_schedules(conn, count, fire_at, args.spread, args.median_seconds, args.sigma,
                           tag)  # fmt: skip
    wait = (fire_at - one(conn, "SELECT now() AS v")).total_seconds()
    time.sleep(max(0.0, wait))
    cpu_before, ticks_before = meter.read()
    began = time.monotonic()
    time.sleep(args.spread)
    settle(conn, SETTLE_LIMIT_SECONDS)
    elapsed = time.monotonic() - began
    cpu_after, ticks_after = meter.read()
    end = fire_at + timedelta(seconds=args.spread)
    runs, p50, p99 = spike_lag(conn, fire_at, end)
    capacity = elapsed * (os.cpu_count() or 1)
    shares = {kind: (cpu_after[kind] - cpu_before[kind]) / capacity for kind in cpu_after}
    busy = (ticks_after[0] - ticks_before[0]) / max(ticks_after[1] - ticks_before[1], 1)
    return Try(rate, runs, p50, p99, shares, busy)


def next_rate(held: float, failed: float | None) -> float:
    """Double while nothing failed, then halve the gap, in steps of RATE_STEP."""
    if failed is None:
        return held * 2
    return round((held + failed) / 2 / RATE_STEP) * RATE_STEP


def find_ceiling(args: argparse.Namespace, url: str, pooled: str) -> None:
    env = fleet_env(url, pooled)
    with connect(url) as conn:
        fleet, workers = start_fleet(args, conn, env)
        try:
            start_submitters(args, fleet, pooled, env)
            meter = CpuMeter(fleet, len(workers))
            time.sleep(min(30.0, args.phase_seconds))  # the steady load warms up
            held: Try | None = None  # the highest rate that held
            failed: Try | None = None  # the lowest that did not
            rate = float(args.ceiling_start)
            for n in range(args.ceiling_tries):
                tried = try_spike(conn, args, meter, rate, f"ceiling{n}")
                print(tried.describe(), flush=True)
                if tried.p99 < args.ceiling_p99:
                    held = tried
                else:
                    failed = tried
                low, high = (held.rate if held else 0.0), (failed.rate if failed else None)
                rate = next_rate(low, high)
                if rate <= low or (high is not None and rate >= high):
                    break  # as fine as the steps go
        finally:
            fleet.stop()
    report(args, held, failed)


def report(args: argparse.Namespace, held: Try | None, failed: Try | None) -> None:
    bound = f"lag p99 under {args.ceiling_p99:g} s"
    if held is None:
        print(f"ceiling: no spike tried held {bound}")
    else:
        above = f" ({failed.rate:,.0f}/s did not)" if failed else " (no rate tried failed)"
        print(f"ceiling: {held.rate:,.0f} spike fires/s with {bound}{above}")
    limit = failed or held
    if limit is not None:
        shares = sorted(limit.cpu_shares.items(), key=lambda kind: -kind[1])[:2]
        print(
            f"what limits it: at {limit.rate:,.0f}/s the machine was "
            f"{limit.machine_busy:.0%} busy (other tenants too); the most CPU went to "
            + " and ".join(f"the {kind} ({share:.0%} of the machine)" for kind, share in shares)
        )
