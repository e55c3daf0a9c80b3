"""Every benchmark still runs end to end, at a tiny size: the figures are not checked
(they belong to quiet machines), only that each completes and prints them."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PGBOUNCER = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")

TINY_RUNS = {
    "history_scale": (
        ["-m", "bench.history_scale", "--days", "2", "--runs-per-day", "2000", "--hot-runs",
         "5000", "--drain-runs", "300", "--rounds", "1", "--samples", "2", "--move-runs", "500"],
        [
            "loaded 2 days x 2,000 runs of history",
            "on-call pages with the month of history underneath:",
            "claim+finish drain of 300 no-op runs",
            "dropped the oldest day (2,000 runs",
            "moved 500 ended runs with their attempts into history",
        ],
    ),
    "trigger_fires": (
        ["-m", "bench.trigger_fires", "--schedules", "300", "--rounds", "1", "--batch", "40"],
        ["fires materialised:   300 runs, 300 ledger rows", "every schedule fired once"],
    ),
    "trigger_fires_distinct": (
        ["-m", "bench.trigger_fires", "--schedules", "300", "--rounds", "1", "--distinct"],
        ["spread of its own", "fires materialised:   300 runs", "every schedule fired once"],
    ),
    "dag_layout": (
        ["-m", "bench.dag_layout", "--rounds", "1"],
        ["1,000-step chain:", "1,000-wide fan-out:", "dense, 300 steps"],
    ),
    "dags": (
        ["-m", "bench.dags", "--nodes", "12", "--rounds", "1"],
        ["wide DAG, 12 no-op nodes", "deep DAG, 12 no-op nodes"],
    ),
    "throughput": (
        [
            "-m",
            "bench.throughput",
            "--runs",
            "300",
            "--rounds",
            "1",
            "--latency-samples",
            "5",
            "--single-submits",
            "50",
            "--drain-runs",
            "300",
            "--limit-keys",
            "10",
        ],
        [
            "machine: ",
            "calibration, server-side INSERT",
            "drain of 300 no-op runs over 10 customers, 2 worker processes, no limits:",
            "the same with at most 1 running per customer:",
            "the same with at most 2 running per customer:",
            "the same with at most 5 running per customer:",
            "steady drain of 300 no-op runs, 2 worker processes:",
            "single submit, sequential on one connection:",
            "bulk submit:",
            "2 worker process(es)",
            "worker start to first claim:",
            "enqueue->start latency, idle: p50",
            "interpreter floor (python + import psycopg, to exit):",
            "end-to-end no-op from the moment 2 worker process(es) are told to start:",
            "enqueue->handler latency, idle worker, round 1: p50",
        ],
    ),
    "worker_memory": (
        ["-m", "bench.worker_memory", "--runs", "200", "--long", "300"],
        ["worker RSS at concurrency 1,000:", "worker RSS over a drain of 300", "300 runs:"],
    ),
    "drain_ceiling": (
        ["-m", "bench.drain_ceiling", "--runs", "300", "--rounds", "1", "--batch", "50"],
        ["machine: ", "claim + complete SQL only, 2 processes, batch 50:"],
    ),
    "drain_ceiling_notify_cost": (
        ["-m", "bench.drain_ceiling", "--runs", "300", "--rounds", "1", "--batch", "50",
         "--notify-cost"],
        ["claim + complete, 2 processes, batch 50: with NOTIFY", "paired ratio median"],
    ),
    "executor_overhead": (["bench/executor_overhead.py", "200", "1"], ["overhead"]),
    "forecast": (
        ["-m", "bench.forecast", "--schedules", "200", "--rounds", "1"],
        ["mixed fleet, 200 schedules: 24-hour forecast", "worst case, 200 schedules"],
    ),
    "sse": (
        ["-m", "bench.sse", "--clients", "10", "--rate", "500", "--seconds", "2"],
        [
            "10 SSE clients connected",
            "change -> client delay: p50",
            "LISTEN connections of the web process: 1",
        ],
    ),
    "pages": (
        ["-m", "bench.pages", "--runs", "3000", "--schedules", "20", "--samples", "2"],
        [
            "page render time over 2 requests",
            "overview (live refresh)",
            "queues",
            "run_list status",
            "run_list search",
            "runs, search (100 match)",
        ],
    ),
    "args_index": (
        ["-m", "bench.args_index", "--runs", "300", "--rounds", "1"],
        ["round 1 ended ", "none         submit", "ended        submit", "drain against none"],
    ),
    "metrics": (
        ["-m", "bench.metrics", "--runs", "2000", "--rounds", "2"],
        ["/metrics reading with 2,000 runs", "no sequential scan"],
    ),
    "seed_day": (
        ["-m", "bench.seed_day", "--minutes", "0.2", "--steady-rate", "50", "--submitters", "1",
         "--spike-schedules", "200", "--spread", "3", "--workers", "1", "--concurrency", "100",
         "--first-spike", "5", "--phase-seconds", "5", "--median-seconds", "0.2",
         "--history-days", "1", "--history-per-day", "1000",
         *([] if PGBOUNCER else ["--direct"])],
        ["loaded 1 days x 1,000 runs of history", "steady (", "spread spike (", "burst spike (",
         "dispatches/s", "lag p50", "per 1,000 dispatches",
         "schedule fires the trigger made: 400 of 400"],
    ),
    "seed_day_ceiling": (
        ["-m", "bench.seed_day", "--find-ceiling", "--ceiling-start", "20", "--ceiling-tries",
         "2", "--steady-rate", "20", "--submitters", "1", "--spread", "2", "--workers", "1",
         "--concurrency", "50", "--phase-seconds", "2", "--median-seconds", "0.2",
         *([] if PGBOUNCER else ["--direct"])],
        ["spike 20 fires/s (", "lag p50", "CPU of the machine: workers", "database",
         "ceiling: ", "what limits it: at "],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TINY_RUNS))
def test_benchmark_runs_and_prints_its_figures(name: str, server_url: str, tmp_path: Path) -> None:
    args, expected = TINY_RUNS[name]
    env = {**os.environ, "BENCH_DATABASE_URL": server_url, "SUNDIAL_LOG_FORMAT": "text"}
    # Output to files, not pipes: a child the benchmark started cannot hold the test up by
    # keeping a pipe open. Its own session: one that overruns ends with what it started.
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout_file, err.open("w") as stderr_file:
        bench = subprocess.Popen(
            [sys.executable, *args], cwd=REPO, env=env, text=True, start_new_session=True,
            stdout=stdout_file, stderr=stderr_file,
        )  # fmt: skip
        try:
            bench.wait(timeout=240)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(bench.pid, signal.SIGKILL)  # whatever it left behind
    stdout, stderr = out.read_text(), err.read_text()
    assert bench.returncode == 0, stderr[-5000:]
    for line in expected:
        assert line in stdout, stdout
