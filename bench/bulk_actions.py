"""Cancel 100,000 runs with one request: the time from the request to the last batch, and
how the runs page answers meanwhile.

Submits `--runs` pending runs of one job (default 100,000) and as many of another job
(which the filter leaves alone), then asks the real application (Starlette TestClient,
an operator's API token) to cancel every run of the first job, as the runs page's
confirmation does, and reads `GET /api/v1/runs` (the runs list) over and over until the
action has finished. Prints the request's own time, the whole action's time and rate, and
the list's p50 / max while it ran.

    python -m bench.bulk_actions
    python -m bench.bulk_actions --runs 20000
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.core.config import Settings
from app.people import tokens, users
from app.runs import submission
from app.runs.run_inserts import NewRun
from app.web import create_app
from bench.bench_db import scratch_database
from bench.machine import describe


def load(url: str, runs: int) -> str:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        for handler in ("nightly-report", "noop"):
            for start in range(0, runs, 20_000):
                batch = [NewRun(handler, args={"day": i}) for i in range(start, start + 20_000)]
                submission.submit_many(conn, batch[: runs - start])
        users.create_user(conn, "bench", "benchmark password", "operator", actor="bench")
        return tokens.create(conn, "bench", "write", name="bench", actor="bench").secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()

    with scratch_database("bench_bulk") as url:
        print("\n".join(describe(url, 3)))
        secret = load(url, args.runs)
        settings = Settings.from_env({"DATABASE_URL": url, "SECRET_KEY": "bench-secret-key"})
        with TestClient(create_app(settings, url)) as client:
            client.headers["authorization"] = f"Bearer {secret}"
            began = time.perf_counter()
            answer = client.post("/api/v1/runs/cancel", json={"filter": {"job": "nightly-report"}})
            answered = time.perf_counter() - began
            assert answer.status_code == 202, answer.text
            action = answer.json()
            pages: list[float] = []
            while True:
                t = time.perf_counter()
                listed = client.get("/api/v1/runs", params={"limit": 50})
                pages.append(time.perf_counter() - t)
                assert listed.status_code == 200
                shown = client.get(f"/api/v1/bulk-actions/{action['id']}").json()
                if shown["status"] == "finished":
                    break
                time.sleep(0.05)
            took = time.perf_counter() - began
        print(f"runs matching: {action['total']:,} (and {args.runs:,} others left alone)")
        print(f"request answered in {answered * 1000:.0f} ms (202, the action under way)")
        print(
            f"cancelled {shown['done']:,}, skipped {shown['skipped']:,} in {took:.1f} s "
            f"({shown['done'] / took:,.0f} runs/s)"
        )
        print(
            f"runs list while it ran: {len(pages)} reads, p50 "
            f"{statistics.median(pages) * 1000:.0f} ms, max {max(pages) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
