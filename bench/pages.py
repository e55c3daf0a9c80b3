"""Server render time of the on-call pages with a big history, and the plans of their
queries.

Loads `--runs` runs (default 1,000,000: a week of history, the last hour busiest, every
status), `--schedules` schedules (default 10,000) with their jobs, attempts for the
failed and retried runs, live and vanished workers; then requests each page through the
real application (Starlette TestClient, signed in) `--samples` times and prints p50/p95 in
milliseconds, and which index (or sequential scan) each of the pages' named queries uses.

    python -m bench.pages                      # the full size (a few minutes to load)
    python -m bench.pages --runs 20000 --schedules 100 --samples 5
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.core.config import Settings
from app.core.sql import query
from app.people import tokens, users
from app.runs import run_list
from app.runs.run_list import search_params
from app.web import create_app
from bench.bench_db import scratch_database
from bench.trigger_fires import create_schedules

PASSWORD = "benchmark password"

# One statement per table, set-based: ids grow with created_at like real history.
LOAD_RUNS = """
INSERT INTO job_runs (handler, job_id, schedule_id, status, priority, base_priority, run_at,
                      attempt, created_at, started_at, finished_at, lease_owner, lease_until,
                      upstream_remaining, last_error, args)
SELECT 'noop', md5('job' || (1 + i %% %(schedules)s))::uuid,
       CASE WHEN i %% 3 = 0 THEN md5('schedule' || (1 + i %% %(schedules)s))::uuid END,
       s.status, 1 + i %% 5, 1 + i %% 5, t.at, CASE WHEN s.status IN ('pending', 'blocked',
       'skipped', 'cancelled') THEN 0 WHEN s.status = 'failed' THEN 4 ELSE 1 END,
       t.at, CASE WHEN s.status IN ('completed', 'failed', 'timed_out', 'running')
       THEN t.at + make_interval(secs => (i %% 7) * 0.05) END,
       CASE WHEN s.status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')
       THEN t.at + make_interval(secs => 0.5 + (i %% 7) * 0.05) END,
       CASE WHEN s.status = 'running' THEN 'worker-' || (i %% 40) END,
       CASE WHEN s.status = 'running' THEN now() + interval '30 seconds' END,
       CASE WHEN s.status = 'blocked' THEN 1 ELSE 0 END,
       CASE WHEN s.status IN ('failed', 'timed_out')
       THEN 'ConnectionError: host ' || (i %% 97) || ' refused' END,
       -- 10,000 customers (100 runs each), a third of the orders in each region
       jsonb_build_object('customer_id', i %% 10000, 'order',
                          jsonb_build_object('region', (ARRAY['eu', 'us', 'apac'])[1 + i %% 3]))
FROM generate_series(1, %(runs)s) AS i
-- the oldest 95%% spread over a week, the newest 5%% over the last hour
CROSS JOIN LATERAL (SELECT CASE
    WHEN i <= %(runs)s * 0.95
    THEN now() - interval '7 days' + (i / (%(runs)s * 0.95)) * interval '6 days 23 hours'
    ELSE now() - interval '1 hour'
         + ((i - %(runs)s * 0.95) / (%(runs)s * 0.05)) * interval '59 minutes'
  END AS at) AS t
CROSS JOIN LATERAL (SELECT CASE
    WHEN i > %(runs)s - 2000 AND i %% 4 = 0 THEN 'pending'
    WHEN i > %(runs)s - 2000 AND i %% 4 = 1 THEN 'running'
    WHEN i > %(runs)s - 2000 AND i %% 4 = 2 THEN 'blocked'
    WHEN i %% 100 < 3 THEN 'failed'
    WHEN i %% 100 = 3 THEN 'timed_out'
    WHEN i %% 100 IN (4, 5) THEN 'cancelled'
    WHEN i %% 100 = 6 THEN 'skipped'
    ELSE 'completed' END AS status) AS s
"""
LOAD_ATTEMPTS = """
INSERT INTO job_run_attempts (run_id, attempt, worker, outcome, started_at, finished_at, error)
SELECT r.id, a, 'worker-' || (r.id % 40),
       CASE WHEN a < r.attempt AND r.id % 10 = 0 THEN 'lost' WHEN a < r.attempt THEN 'failed'
            ELSE r.status END,
       r.started_at, coalesce(r.finished_at, now()), r.last_error
FROM job_runs r, generate_series(1, r.attempt) AS a
WHERE r.status IN ('failed', 'timed_out') OR (r.status = 'completed' AND r.id % 20 = 0)
"""
LOAD_WORKERS = """
INSERT INTO workers (id, host, pid, concurrency, handlers, stats, last_seen, stopped_at)
SELECT 'worker-' || i, 'host-' || (i % 10), 1000 + i, 16, '["noop", "sleep", "http"]',
       '{"in_flight": 3, "loop_lag_ms": 0.4, "threads_total": 8, "threads_busy": 2}',
       CASE WHEN i < 40 THEN now() ELSE now() - interval '20 minutes' END,
       CASE WHEN i >= 50 THEN now() - interval '20 minutes' END
FROM generate_series(0, 59) AS i
"""
# The named queries behind the pages, with the parameters the pages pass.
PAGE_QUERIES: list[tuple[str, str, dict[str, Any]]] = [
    ("web", "overview_run_counts", {"cap": 10_000}),
    ("web", "overview_pending_depth", {"now": None}),
    ("web", "overview_minutes", {"since": datetime.now(UTC) - timedelta(hours=1)}),
    ("web", "overview_live_workers", {"now": None, "stale_seconds": 30}),
    ("web", "overview_poison_jobs", {"now": None}),
    ("web", "overview_lease_expiries", {"now": None}),
    ("web", "overview_stuck_runs", {"now": None, "grace_seconds": 60}),
    ("web", "workers_live", {"now": None, "stale_seconds": 30}),
    ("web", "workers_gone", {"now": None, "stale_seconds": 30}),
    ("web", "workers_released_runs", {"now": None, "workers": ["worker-45", "worker-55"]}),
    ("web", "run_detail_attempts", {"id": 12345}),
]
NO_FILTER: dict[str, Any] = dict.fromkeys(
    (
        "before_id",
        "status",
        "handler",
        "job_id",
        "schedule_id",
        "dag_run_id",
        "since",
        "until",
        "error",
        "queue",
        "args_any",
        "result_any",
    )
) | {"limit": 51}
RUN_LISTS: list[tuple[str, dict[str, Any]]] = [
    ("run_list (newest)", {}),
    ("run_list status", {"status": "failed"}),
    ("run_list job", {"job_id": "00000000-0000-0000-0000-000000000007"}),
    ("run_list handler", {"handler": "noop"}),
    ("run_list schedule", {"schedule_id": "00000000-0000-0000-0000-000000000007"}),
    ("run_list error", {"error": "%host 13 refused%"}),
    ("run_list older page", {"before_id": 500_000}),
    ("run_list search", search_params("customer_id = 42")),
    ("run_list search, common", search_params("order.region = eu")),
    ("run_list search, failed", {**search_params("customer_id = 42"), "status": "failed"}),
]


def load(url: str, runs: int, schedules: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.monotonic()
        create_schedules(conn, schedules)  # type: ignore[arg-type]
        conn.execute(LOAD_RUNS, {"runs": runs, "schedules": schedules})  # type: ignore[arg-type]
        conn.execute(LOAD_ATTEMPTS)  # type: ignore[arg-type]
        conn.execute(LOAD_WORKERS)  # type: ignore[arg-type]
        for table in ("job_runs", "job_run_attempts", "workers"):
            conn.execute(f"VACUUM ANALYZE {table}")  # type: ignore[arg-type]
        print(f"loaded {runs:,} runs and {schedules:,} schedules in "
              f"{time.monotonic() - started:.0f} s")  # fmt: skip


def scans(url: str) -> None:
    """Each page query's scans from EXPLAIN: an index name, or a sequential scan."""
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        for file, name, params in PAGE_QUERIES:
            sql = query(file, name)
            args = {k: v for k, v in params.items()}
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, args).fetchone()  # type: ignore[operator]
            assert plan is not None
            found = sorted(set(_scans(plan["QUERY PLAN"][0]["Plan"])))
            print(f"  {name:<26} {', '.join(found) or 'no table scan'}")
        for label, given in RUN_LISTS:
            sql = query("web", "run_list")
            params = {**NO_FILTER, **given}
            with run_list.planned(conn, params):  # as the runs page plans it
                plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()  # type: ignore[operator]
            assert plan is not None
            found = sorted(set(_scans(plan["QUERY PLAN"][0]["Plan"])))
            print(f"  {label:<26} {', '.join(found)}")


def _scans(node: dict[str, Any]) -> list[str]:
    found = []
    kind = node.get("Node Type", "")
    if "Scan" in kind and kind not in ("CTE Scan", "Function Scan", "Subquery Scan"):
        found.append(
            (node.get("Index Name") and f"{node['Index Name']}")
            or f"{kind} on {node.get('Relation Name')}"
        )
    for child in node.get("Plans", []):
        found += _scans(child)
    return found


def time_pages(url: str, samples: int) -> None:
    # /metrics is timed too: public for the bench, and read afresh each request (cache 10 ms)
    settings = Settings.from_env({
        "DATABASE_URL": url, "SECRET_KEY": "bench-secret-key",
        "SUNDIAL_METRICS_PUBLIC": "1", "SUNDIAL_METRICS_CACHE_SECONDS": "0.01",
    })  # fmt: skip
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        if users.find_user(conn, "bench") is None:  # a database measured before has it
            users.create_user(conn, "bench", PASSWORD, "viewer", actor="bench")
        token = tokens.create(conn, "bench", "read", name="bench pages", actor="bench")
        newest = conn.execute("SELECT max(id) AS id FROM job_runs").fetchone()
        failed = conn.execute(
            "SELECT max(id) AS id FROM job_runs WHERE status = 'failed'"
        ).fetchone()
    assert newest and failed
    middle = newest["id"] // 2
    pages = {
        "overview": "/",
        "overview (live refresh)": "/",
        "runs": "/runs",
        "runs, failed": "/runs?status=failed",
        "runs, job": "/runs?job=job-7",
        "runs, schedule": "/runs?schedule=schedule-7",
        "runs, error text": "/runs?error=host+13+refused",
        "runs, search (100 match)": "/runs?search=customer_id+%3D+42",
        "runs, search, a third": "/runs?search=order.region+%3D+eu",
        "runs, search and failed": "/runs?search=customer_id+%3D+42&status=failed",
        "runs, search, two fields": "/runs?search=customer_id+%3D+42+and+order.region+%3D+apac",
        "runs, search, no run holds": "/runs?search=customer_id+%3D+123456",
        "API runs, search": "/api/v1/runs?search=customer_id+%3D+42",
        "runs, older page": f"/runs?before={middle}",
        "runs, last hour": "/runs?from="
        + time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 3600)),
        "run": f"/runs/{failed['id']}",
        "workers": "/workers",
        "queues": "/queues",
        "schedules": "/schedules",
        "schedules, a later page": "/schedules?after=schedule-5000",
        "jobs": "/jobs",
        "/metrics": "/metrics",
    }
    with TestClient(create_app(settings, url)) as client:
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', client.get("/login").text)
        assert csrf
        client.post("/login", data={"username": "bench", "password": PASSWORD,
                                    "csrf_token": csrf[1]})  # fmt: skip
        print(f"page render time over {samples} requests (ms):")
        for name, path in pages.items():
            headers = {"HX-Request": "true"} if "live refresh" in name else {}
            if path.startswith("/api/"):
                headers = {"Authorization": f"Bearer {token.secret}"}
            times = []
            for _ in range(samples):
                if path == "/metrics":
                    time.sleep(0.02)  # past its 10 ms cache: each reading is a fresh one
                started = time.perf_counter()
                response = client.get(path, headers=headers)
                times.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200, (path, response.status_code)
            times.sort()
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            print(f"  {name:<26} p50 {statistics.median(times):7.1f}   p95 {p95:7.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args(argv)
    with scratch_database("sundial_bench_pages") as url:
        load(url, args.runs, args.schedules)
        print("query plans (index used, or sequential scan):")
        scans(url)
        time_pages(url, args.samples)
    print(json.dumps({"runs": args.runs, "schedules": args.schedules}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
