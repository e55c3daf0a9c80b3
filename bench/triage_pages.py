"""Server render time of the triage pages (dead letters, DAG runs, job statistics, run
log, lag) with a big history, and the scans of their queries.

Loads the same history as `bench.pages` (`--runs`, default 1,000,000, and `--schedules`,
default 10,000), fingerprints its dead letters as the failing transition would, gives
100 schedules a lag threshold, submits 200 DAG runs and 2,000 log lines for one run, fills
the job statistics roll-up as the reaper would have (and says how long that took); then
requests each page `--samples` times through the real application and prints p50/p95 in
milliseconds, and which index (or sequential scan) each page's named queries use.

    python -m bench.triage_pages
    python -m bench.triage_pages --runs 20000 --schedules 100 --samples 5
    python -m bench.triage_pages --keep            # leave the loaded database, print its URL
    python -m bench.triage_pages --database URL    # time (and explain) a kept one again
    python -m bench.triage_pages --database URL --explain   # EXPLAIN (ANALYZE, BUFFERS) too
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.core import migrate
from app.core.config import Settings
from app.core.sql import query
from app.dags import dag_submission
from app.observability import job_stats
from app.people import users
from app.runs import run_logs
from app.runs.run_inserts import NewRun
from app.web import create_app
from bench.bench_db import scratch_database, server_url
from bench.pages import PASSWORD, _scans, load

# The loaded errors differ only by a number (`host 13 refused`): one fingerprint each way
# the transition would store it, computed here in SQL for speed.
FINGERPRINT_DEAD_LETTERS = """
UPDATE job_runs
SET error_fingerprint = substr(md5(regexp_replace(last_error, '[0-9]+', '<n>', 'g')), 1, 16)
WHERE status IN ('failed', 'timed_out')
"""
WATCH_SCHEDULES = """
UPDATE schedules SET lag_slo_seconds = 60
WHERE id IN (SELECT id FROM schedules ORDER BY name LIMIT 100)
"""


def prepare(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(FINGERPRINT_DEAD_LETTERS)  # type: ignore[arg-type]
        conn.execute(WATCH_SCHEDULES)  # type: ignore[arg-type]
        for i in range(200):
            steps = {f"step {s}": NewRun("noop") for s in range(8)}
            edges = [(f"step {s}", f"step {s + 1}") for s in range(7)]
            dag = dag_submission.submit_dag(conn, steps, edges, name=f"nightly {i}")
        logged = conn.execute("SELECT max(id) AS id FROM job_runs WHERE status = 'failed'")
        run_id = logged.fetchone()["id"]  # type: ignore[index]
        lines = [
            run_logs.LogLine(run_id, 1, seq, time.time(), "log", f"INFO app: line {seq}")
            for seq in range(2000)
        ]
        run_logs.append(conn, lines)
        fingerprint = conn.execute(
            "SELECT error_fingerprint FROM job_runs WHERE id = %s", (run_id,)
        ).fetchone()["error_fingerprint"]  # type: ignore[index]
        for table in ("job_runs", "run_logs", "schedules", "dag_runs"):
            conn.execute(f"VACUUM ANALYZE {table}")  # type: ignore[arg-type]
        # the reaper fills the statistics roll-up as minutes close; here, the day at once
        started = time.monotonic()
        job_stats.fill(conn)
        print(f"filled the job statistics roll-up in {time.monotonic() - started:.1f} s")
        for table in ("job_stat_hours", "job_stat_durations", "job_stat_window"):
            conn.execute(f"VACUUM ANALYZE {table}")  # type: ignore[arg-type]
    return {"dag": dag.id, "run": run_id, "fingerprint": fingerprint}


def made_in(url: str) -> dict[str, Any]:
    """What `prepare` made, found again in a kept database."""
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        row = conn.execute(
            "SELECT (SELECT id FROM dag_runs ORDER BY created_at DESC LIMIT 1) AS dag, "
            "r.id AS run, r.error_fingerprint AS fingerprint FROM job_runs r "
            "WHERE r.id = (SELECT max(run_id) FROM run_logs)"
        ).fetchone()
    assert row is not None, "this database was not loaded by bench.triage_pages"
    return row


@contextmanager
def kept_database(name: str) -> Iterator[str]:
    """A database that outlives the benchmark (for EXPLAIN on the bench data)."""
    admin = server_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    url = urlunsplit(urlsplit(admin)._replace(path=f"/{name}"))
    migrate.upgrade(url)
    yield url


def scans(url: str, made: dict[str, Any], *, analyze: bool = False) -> None:
    queries: list[tuple[str, str, dict[str, Any]]] = [
        ("dead_letters", "dead_letter_groups", {"limit": 100, "count_cap": 10_000}),
        (
            "dead_letters",
            "dead_letter_group",
            {"fingerprint": made["fingerprint"], "count_cap": 10_000},
        ),
        (
            "dead_letters",
            "dead_letter_hourly",
            {"fingerprints": [made["fingerprint"]], "now": None},
        ),
        (
            "dead_letters",
            "dead_letter_group_runs",
            {"fingerprint": made["fingerprint"], "limit": 200},
        ),
        ("job_stats", "job_stats_summary", {"sort": "failing", "limit": 50}),
        ("job_stats", "job_stats_summary", {"sort": "slowest", "limit": 50}),
        ("dag_runs", "dag_runs_recent", {"before": None, "limit": 50}),
        ("dag_runs", "dag_run_steps", {"id": made["dag"]}),
        ("run_logs", "run_logs_of_run", {"run_id": made["run"], "limit": 5000}),
        ("lag_slo", "slo_breakdown", {"now": None, "hours": 24, "limit": 500}),
        ("lag_slo", "slo_overdue_schedules", {"now": None, "grace": 60, "limit": 50}),
    ]
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        for file, name, params in queries:
            if analyze:
                text = conn.execute(
                    "EXPLAIN (ANALYZE, BUFFERS) " + query(file, name),  # type: ignore[operator]
                    params,
                ).fetchall()
                print(f"--- {name}\n" + "\n".join(r["QUERY PLAN"] for r in text))
                continue
            plan = conn.execute(
                "EXPLAIN (FORMAT JSON) " + query(file, name),  # type: ignore[operator]
                params,
            ).fetchone()
            assert plan is not None
            # a recursive walk's own work table is not a table scan
            found = sorted(
                {s for s in _scans(plan["QUERY PLAN"][0]["Plan"]) if "WorkTable" not in s}
            )
            print(f"  {name:<26} {', '.join(found) or 'no table scan'}")


def time_pages(url: str, samples: int, made: dict[str, Any]) -> None:
    settings = Settings.from_env({"DATABASE_URL": url, "SECRET_KEY": "bench-secret-key"})
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        if users.find_user(conn, "bench") is None:
            users.create_user(conn, "bench", PASSWORD, "viewer", actor="bench")
    pages = {
        "dead letters": "/dead-letters",
        "dead letter group": f"/dead-letters/{made['fingerprint']}",
        "job statistics": "/job-stats",
        "job statistics, slowest": "/job-stats?sort=slowest",
        "DAG runs": "/dag-runs",
        "DAG run": f"/dag-runs/{made['dag']}",
        "run log (2,000 lines)": f"/runs/{made['run']}/logs",
        "lag": "/slo",
    }
    with TestClient(create_app(settings, url)) as client:
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', client.get("/login").text)
        assert token
        client.post("/login", data={"username": "bench", "password": PASSWORD,
                                    "csrf_token": token[1]})  # fmt: skip
        print(f"page render time over {samples} requests (ms):")
        for name, path in pages.items():
            client.get(path)  # once untimed: a fresh process's first render fills its caches
            times = []
            for _ in range(samples):
                started = time.perf_counter()
                response = client.get(path)
                times.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200, (path, response.status_code)
            times.sort()
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            print(f"  {name:<26} p50 {statistics.median(times):7.1f}   p95 {p95:7.1f}"
                  f"   max {times[-1]:7.1f}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--keep", action="store_true", help="keep the loaded database")
    parser.add_argument("--database", help="a database kept by --keep: skip the load")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN (ANALYZE, BUFFERS)")
    args = parser.parse_args(argv)
    if args.database:
        made = made_in(args.database)
        if args.explain:
            scans(args.database, made, analyze=True)
        time_pages(args.database, args.samples, made)
        return 0
    name = f"sundial_bench_triage_kept_{int(time.time())}"
    with kept_database(name) if args.keep else scratch_database("sundial_bench_triage") as url:
        load(url, args.runs, args.schedules)
        made = prepare(url)
        print("query plans (index used, or sequential scan):")
        scans(url, made, analyze=args.explain)
        time_pages(url, args.samples, made)
        if args.keep:
            print(f"kept: python -m bench.triage_pages --database {url}")
    print(json.dumps({"runs": args.runs, "schedules": args.schedules}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
