"""The design's day, compressed in time: steady submits plus top-of-hour spikes of
schedule fires, run end to end by real processes through a transaction pooler.

    .venv/bin/python -m bench.seed_day [--minutes 10] [--steady-rate 580] [--submitters 4]
        [--spike-schedules 60000] [--spread 10] [--workers 14] [--concurrency 1000]
        [--median-seconds 2] [--sigma 0.5] [--pool-size 20] [--direct]
        [--history-days 0] [--history-per-day 1000000]
    .venv/bin/python -m bench.seed_day --find-ceiling [--ceiling-start 2000]
        [--ceiling-tries 5] [--ceiling-p99 5] [the fleet's options above]

The design sizes Sundial at 50 M runs a day: 580 a second on average, ten times that at
the top of the hour, runs of 2 s median. This benchmark plays that day on one machine:

- `--submitters` processes submit `--steady-rate` runs a second between them, in batches
  every 100 ms, each a `sleep` run whose length is log-normal (`--median-seconds`,
  `--sigma`);
- two sets of `--spike-schedules` hourly schedules fire at a simulated top of the hour:
  the first `--first-spike` seconds after the start, spread over `--spread` seconds
  (6,000 a second with the defaults), the second half-way through the day, all at once
  (spread off); each run a `sleep` of the same log-normal lengths. The trigger makes the
  fires, as in production;
- `--workers` worker processes of `--concurrency` slots, the trigger and the reaper reach
  the database through a transaction-mode PgBouncer of `--pool-size` server connections
  (`--direct`: without it), their listeners directly, as a real fleet's would;
- with `--history-days`, that many days of ended runs (`--history-per-day` each) are
  loaded first into the history's day partitions, as the reaper leaves them, so that
  claims, finishes and the reaper's passes run beside a month of history.

It prints, per phase (steady, spread spike, burst spike): dispatches a second achieved,
schedule lag (started_at - run_at, the design's SLO metric) p50/p99/max over the runs due
in the phase (runs not started by its end count with their wait so far), the deepest
pending backlog, the database's share of the machine's CPU, and the database connections
used; then the database's growth, CPU per 1,000 dispatches (every process of the
benchmark) and memory per 1,000 runs in flight (workers' resident memory).

`--find-ceiling` plays short spikes instead, over the same fleet and steady submits, to
find the highest spike rate whose schedule lag p99 stays under `--ceiling-p99` seconds
(see `bench.spike_ceiling`).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.bench_db import REPO, scratch_database
from bench.history_scale import load_history
from bench.machine import describe
from bench.pooler import transaction_pooler

BATCH_SECONDS = 0.1  # a submitter's cadence
SAMPLE_SECONDS = 1.0
DRAIN_SECONDS = 60  # after the traffic stops, for in-flight runs to end
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def connect(url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row, prepare_threshold=None)


def one(conn: psycopg.Connection[dict[str, Any]], sql: str, *params: Any) -> Any:
    """The single value `sql` selects (as `v`)."""
    row = conn.execute(sql, params or None).fetchone()
    assert row is not None
    return row["v"]


def run_seconds(chance: random.Random, median: float, sigma: float) -> float:
    return round(math.exp(chance.gauss(math.log(median), sigma)), 3)


# ---- the pieces ----------------------------------------------------------------------------


def create_spike_schedules(
    conn: psycopg.Connection[dict[str, Any]], count: int, fire_at: datetime, spread: int,
    median: float, sigma: float, tag: str,
) -> None:  # fmt: skip
    """`count` hourly schedules whose next fire is `fire_at` (a simulated top of the hour),
    spread over `spread` seconds, each running a `sleep` of its own log-normal length."""
    chance = random.Random(tag)
    seconds = [run_seconds(chance, median, sigma) for _ in range(count)]
    conn.execute(
        "INSERT INTO job_definitions (id, name, handler, args) "
        "SELECT md5(%(tag)s || i)::uuid, %(tag)s || '-' || i, 'sleep', "
        "jsonb_build_object('seconds', (%(seconds)s::float8[])[i]) "
        "FROM generate_series(1, %(count)s) AS i",
        {"tag": tag, "seconds": seconds, "count": count},
    )
    conn.execute(
        "INSERT INTO schedules (id, job_id, name, interval_seconds, timezone, start_at, "
        "next_fire_time, created_at, spread_seconds) "
        "SELECT md5('s' || %(tag)s || i)::uuid, md5(%(tag)s || i)::uuid, %(tag)s || '-' || i, "
        "3600, 'UTC', %(fire)s, %(fire)s, now(), %(spread)s "
        "FROM generate_series(1, %(count)s) AS i",
        {"tag": tag, "fire": fire_at, "spread": spread, "count": count},
    )
    conn.execute("VACUUM ANALYZE schedules")


def submitter(url: str, rate: float, seed: int, median: float, sigma: float) -> None:
    """One submitting process: `rate` runs a second in batches, until killed."""
    from app.core.db import connect as sundial_connect
    from app.runs import submission
    from app.runs.run_inserts import NewRun

    chance = random.Random(seed)
    owed = 0.0
    with sundial_connect(url, autocommit=True) as conn:
        next_at = time.monotonic()
        while True:
            owed += rate * BATCH_SECONDS
            count, owed = int(owed), owed - int(owed)
            if count:
                runs = [NewRun("sleep", {"seconds": run_seconds(chance, median, sigma)})
                        for _ in range(count)]  # fmt: skip
                submission.submit_many(conn, runs)
            next_at += BATCH_SECONDS
            time.sleep(max(0.0, next_at - time.monotonic()))


@dataclass
class Fleet:
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
        self.processes.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.processes:
            proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Sample:
    at: float  # monotonic
    wall: datetime
    due: int
    running: int
    connections: int
    db_cpu: float  # cumulative seconds
    all_cpu: float
    worker_rss: int


def take_sample(
    conn: psycopg.Connection[dict[str, Any]], fleet: Fleet, workers: list[int]
) -> Sample:
    row = conn.execute(
        "SELECT now() AS wall, "
        "(SELECT count(*) FROM job_runs WHERE status = 'pending' AND run_at <= now()) AS due, "
        "(SELECT count(*) FROM job_runs WHERE status = 'running') AS running, "
        "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS conns"
    ).fetchone()
    assert row is not None
    db = _postgres_pids()
    mine = [p.pid for p in fleet.processes]
    return Sample(
        time.monotonic(), row["wall"], row["due"], row["running"], row["conns"],
        _cpu_seconds(db), _cpu_seconds(db + mine),
        sum(_rss_bytes(pid) for pid in workers),
    )  # fmt: skip


# ---- the day -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    name: str
    start: datetime
    end: datetime


def phase_figures(conn: psycopg.Connection[dict[str, Any]], phase: Phase) -> dict[str, Any]:
    """Dispatches a second and schedule lag of the runs due within `phase`."""
    row = conn.execute(
        "WITH due AS (SELECT coalesce(started_at, %(end)s) - run_at AS lag, started_at "
        "FROM job_runs WHERE run_at >= %(start)s AND run_at < %(end)s) "
        "SELECT count(*) AS runs, "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM lag)) AS p50, "
        "percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM lag)) AS p99, "
        "max(extract(epoch FROM lag)) AS max, "
        "(SELECT count(*) FROM job_runs WHERE started_at >= %(start)s AND started_at < %(end)s) "
        "AS started FROM due",
        {"start": phase.start, "end": phase.end},
    ).fetchone()
    assert row is not None
    seconds = (phase.end - phase.start).total_seconds()
    return {**row, "dispatches_per_second": row["started"] / seconds}


def sample_figures(samples: list[Sample], phase: Phase, cores: int) -> dict[str, float]:
    inside = [s for s in samples if phase.start <= s.wall < phase.end]
    if len(inside) < 2:
        return {"depth": 0, "db_cpu_share": 0.0, "connections": 0}
    elapsed = inside[-1].at - inside[0].at
    return {
        "depth": max(s.due for s in inside),
        "db_cpu_share": (inside[-1].db_cpu - inside[0].db_cpu) / elapsed / cores,
        "connections": max(s.connections for s in inside),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument(
        "--phase-seconds", type=int, default=40, help="a spike's phase: its first fire on"
    )
    parser.add_argument("--steady-rate", type=float, default=580.0)
    parser.add_argument("--submitters", type=int, default=4)
    parser.add_argument("--spike-schedules", type=int, default=60_000)
    parser.add_argument("--spread", type=int, default=10)
    parser.add_argument(
        "--first-spike", type=float, default=120.0, help="seconds from the start to the first"
    )
    parser.add_argument("--workers", type=int, default=14)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--median-seconds", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=0.5)
    parser.add_argument("--pool-size", type=int, default=20)
    parser.add_argument("--direct", action="store_true", help="no pooler in between")
    parser.add_argument("--history-days", type=int, default=0)
    parser.add_argument("--history-per-day", type=int, default=1_000_000)
    parser.add_argument(
        "--find-ceiling", action="store_true",
        help="instead of the day: the highest spike rate with lag p99 under --ceiling-p99",
    )  # fmt: skip
    parser.add_argument("--ceiling-start", type=float, default=2000.0, help="first rate tried")
    parser.add_argument("--ceiling-tries", type=int, default=5)
    parser.add_argument("--ceiling-p99", type=float, default=5.0, help="seconds")
    parser.add_argument(
        "--submitter", nargs=3, metavar=("URL", "RATE", "SEED"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.submitter:
        url, rate, seed = args.submitter
        submitter(url, float(rate), int(seed), args.median_seconds, args.sigma)
        return 0
    cores = os.cpu_count() or 1
    with scratch_database("sundial_bench_day") as url:
        print("\n".join(describe(url, 1)), flush=True)
        if args.find_ceiling:
            find_ceiling_through_pooler(args, url)
            return 0
        with connect(url) as conn:
            if args.history_days:  # in day partitions, as the reaper leaves it
                load_history(url, args.history_days, args.history_per_day)
            now = one(conn, "SELECT now() AS v")
            spread_at = now + timedelta(seconds=args.first_spike)
            burst_at = spread_at + timedelta(
                seconds=max(args.phase_seconds + 20, args.minutes * 30)
            )
            create_spike_schedules(conn, args.spike_schedules, spread_at, args.spread,
                                   args.median_seconds, args.sigma, "spread")  # fmt: skip
            create_spike_schedules(conn, args.spike_schedules, burst_at, 0, args.median_seconds,
                                   args.sigma, "burst")  # fmt: skip
            size_before = one(conn, "SELECT pg_database_size(current_database()) AS v")
        if args.direct:
            run_day(args, url, url, cores, size_before, spread_at, burst_at)
        else:
            with transaction_pooler(url, args.pool_size) as pooled:
                run_day(args, url, pooled, cores, size_before, spread_at, burst_at)
    return 0


PYTHON = [sys.executable, "-m"]


def fleet_env(url: str, pooled: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": pooled, "SUNDIAL_LOG_LEVEL": "WARNING",
           "SUNDIAL_LOG_FORMAT": "text", "PYTHONUNBUFFERED": "1"}  # fmt: skip
    env.pop("TEST_DATABASE_URL", None)
    if pooled != url:
        env.update(SUNDIAL_DATABASE_POOLER="transaction", SUNDIAL_DIRECT_DATABASE_URL=url)
    return env


def start_fleet(
    args: argparse.Namespace, conn: psycopg.Connection[dict[str, Any]], env: dict[str, str]
) -> tuple[Fleet, list[int]]:
    """The workers, the trigger and the reaper, once every worker has registered; the
    fleet and the workers' process ids."""
    fleet = Fleet()
    worker = [*PYTHON, "app.cli", "worker", "--concurrency", str(args.concurrency)]
    workers = [fleet.start(worker, env).pid for _ in range(args.workers)]
    fleet.start([*PYTHON, "app.cli", "trigger"], env)
    fleet.start([*PYTHON, "app.cli", "reaper"], env)
    deadline = time.monotonic() + 60
    while one(conn, "SELECT count(*) AS v FROM workers WHERE stopped_at IS NULL") < len(workers):
        if time.monotonic() > deadline:
            fleet.stop()
            raise SystemExit("the workers did not start within a minute")
        time.sleep(0.2)
    return fleet, workers


def start_submitters(
    args: argparse.Namespace, fleet: Fleet, pooled: str, env: dict[str, str]
) -> None:
    for n in range(args.submitters):
        rate = args.steady_rate / args.submitters
        fleet.start([*PYTHON, "bench.seed_day", "--median-seconds", str(args.median_seconds),
                     "--sigma", str(args.sigma), "--submitter", pooled, str(rate), str(n)],
                    env)  # fmt: skip


def find_ceiling_through_pooler(args: argparse.Namespace, url: str) -> None:
    from bench.spike_ceiling import find_ceiling  # it builds on this module

    if args.direct:
        find_ceiling(args, url, url)
    else:
        with transaction_pooler(url, args.pool_size) as pooled:
            find_ceiling(args, url, pooled)


def run_day(
    args: argparse.Namespace, url: str, pooled: str, cores: int, size_before: int,
    spread_at: datetime, burst_at: datetime,
) -> None:  # fmt: skip
    env = fleet_env(url, pooled)
    samples: list[Sample] = []
    with connect(url) as conn:
        fleet, workers = start_fleet(args, conn, env)
        idle = take_sample(conn, fleet, workers)  # the workers' own memory, before any work
        began = one(conn, "SELECT now() AS v")
        start_submitters(args, fleet, pooled, env)
        # at least until the second spike's phase has passed
        last = (burst_at - began).total_seconds() + args.phase_seconds + 5
        ends = time.monotonic() + max(args.minutes * 60, last)
        try:
            while time.monotonic() < ends:
                samples.append(take_sample(conn, fleet, workers))
                time.sleep(SAMPLE_SECONDS)
            for proc in fleet.processes[args.workers + 2 :]:  # the submitters stop
                proc.terminate()
            stopped = one(conn, "SELECT now() AS v")
            drain_until = time.monotonic() + DRAIN_SECONDS
            while time.monotonic() < drain_until:
                sample = take_sample(conn, fleet, workers)
                samples.append(sample)
                if sample.due == 0 and sample.running == 0:
                    break
                time.sleep(SAMPLE_SECONDS)
        finally:
            fleet.stop()
        report(conn, args, [idle, *samples], began, stopped, cores, size_before, spread_at,
               burst_at)  # fmt: skip


def report(
    conn: psycopg.Connection[dict[str, Any]], args: argparse.Namespace, samples: list[Sample],
    began: datetime, stopped: datetime, cores: int, size_before: int, spread_at: datetime,
    burst_at: datetime,
) -> None:  # fmt: skip
    length = timedelta(seconds=args.phase_seconds)
    spikes = [
        Phase("spread spike", spread_at, spread_at + length),
        Phase("burst spike", burst_at, burst_at + length),
    ]
    warm = began + timedelta(seconds=30)
    steady = [
        Phase("steady", warm, spikes[0].start),
        Phase("steady", spikes[0].end, spikes[1].start),
        Phase("steady", spikes[1].end, stopped),
    ]
    pooler = f"through a transaction pooler of {args.pool_size}"
    print(
        f"the day: {args.minutes:g} min, {args.steady_rate:g} submits/s from {args.submitters} "
        f"processes, 2 x {args.spike_schedules:,} schedule fires (spread {args.spread} s, then "
        f"none), sleep runs median {args.median_seconds:g} s (sigma {args.sigma:g}); "
        f"{args.workers} workers x {args.concurrency} slots, "
        + ("direct connections" if args.direct else pooler)
    )
    clipped = [Phase(p.name, p.start, min(p.end, stopped)) for p in steady + spikes]
    for phase in [p for p in clipped if p.end > p.start]:
        runs = phase_figures(conn, phase)
        seen = sample_figures(samples, phase, cores)
        print(
            f"{phase.name} ({phase.start:%H:%M:%S}-{phase.end:%H:%M:%S}): "
            f"{runs['dispatches_per_second']:,.0f} dispatches/s, {runs['runs']:,} runs due, "
            f"lag p50 {float(runs['p50'] or 0):.2f} s, p99 {float(runs['p99'] or 0):.2f} s, "
            f"max {float(runs['max'] or 0):.2f} s; deepest backlog {seen['depth']:,} due; "
            f"database CPU {seen['db_cpu_share']:.0%} of the machine; "
            f"{seen['connections']} database connections"
        )
    fired = one(conn, "SELECT count(*) AS v FROM schedule_fires WHERE outcome = 'enqueued'")
    print(f"schedule fires the trigger made: {fired:,} of {2 * args.spike_schedules:,}")
    size_after = one(conn, "SELECT pg_database_size(current_database()) AS v")
    started = one(conn, "SELECT count(*) AS v FROM job_runs WHERE started_at >= %s", began)
    cpu = samples[-1].all_cpu - samples[0].all_cpu
    peak = max(samples, key=lambda s: s.running)
    idle = samples[0]  # taken once the workers had started, before any work
    per_thousand = (peak.worker_rss - idle.worker_rss) / max(peak.running - idle.running, 1) * 1000
    print(
        f"database grew {(size_after - size_before) / 1e6:,.0f} MB for {started:,} runs "
        f"({(size_after - size_before) / max(started, 1):,.0f} bytes a run); "
        f"CPU {cpu / max(started, 1) * 1000:.2f} s per 1,000 dispatches (database and "
        f"Sundial's processes); workers' memory {peak.worker_rss / 1e6:,.0f} MB with "
        f"{peak.running:,} runs in flight "
        f"({per_thousand / 1e6:,.1f} MB more per 1,000)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
