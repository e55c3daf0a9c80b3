"""The event stream under load: `--clients` SSE clients (default 1,000) on one real
`sundial web` process while `--rate` run-change notifications a second (default 5,000)
arrive for `--seconds` (default 20).

Prints the ticks each client received per second (the hub coalesces: at most four), the
delivery delay of a change to the clients (the wait for the next flush plus transport:
from each notification batch to the first tick every client got after it), p50/p99, the
web process's CPU and peak memory, and its LISTEN connections (one).

    python -m bench.sse
    python -m bench.sse --clients 50 --rate 500 --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import psutil
import psycopg
from psycopg.rows import dict_row

from app import users
from app.web.events import LISTENER_NAME
from bench.bench_db import scratch_database

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "benchmark password"
BATCH = 50  # notifications per transaction (distinct payloads: PostgreSQL keeps them all)


def start_web(url: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": url, "SUNDIAL_LOG_LEVEL": "warning"}
    env.pop("BENCH_DATABASE_URL", None)
    web = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "web", "--host", "127.0.0.1", "--port", str(port)],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return web
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    web.kill()
    raise SystemExit("sundial web did not start")


def sign_in(base: str) -> dict[str, str]:
    with httpx.Client(base_url=base) as client:
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', client.get("/login").text)
        assert token
        client.post("/login", data={"username": "bench", "password": PASSWORD,
                                    "csrf_token": token[1]})  # fmt: skip
        return dict(client.cookies)


def storm(url: str, rate: int, seconds: float, sent: list[float]) -> None:
    """`rate` notifications a second in batches of BATCH; the time of each batch in `sent`."""
    with psycopg.connect(url, autocommit=True) as conn:
        interval = BATCH / rate
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < seconds:
            conn.execute(
                "SELECT pg_notify('sundial_runs', g::text) FROM generate_series(1, %s) AS g",
                [BATCH],
            )
            sent.append(time.monotonic())
            n += 1
            pause = start + n * interval - time.monotonic()
            if pause > 0:
                time.sleep(pause)


async def client_ticks(
    client: httpx.AsyncClient, ticks: list[float], ready: asyncio.Event, stop: asyncio.Event
) -> None:
    async with client.stream("GET", "/events?topics=runs") as response:
        first = True
        async for line in response.aiter_lines():
            if line == "event: runs":
                if first:
                    first = False
                    ready.set()
                else:
                    ticks.append(time.monotonic())
            if stop.is_set():
                return


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


async def measure(base: str, cookies: dict[str, str], args: argparse.Namespace, url: str) -> None:
    limits = httpx.Limits(max_connections=args.clients + 10)
    async with httpx.AsyncClient(base_url=base, cookies=cookies, timeout=60, limits=limits) as c:
        stop = asyncio.Event()
        readies = [asyncio.Event() for _ in range(args.clients)]
        ticks: list[list[float]] = [[] for _ in range(args.clients)]
        tasks = [asyncio.create_task(client_ticks(c, ticks[i], readies[i], stop))
                 for i in range(args.clients)]  # fmt: skip
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 300)
        for t in ticks:
            t.clear()
        print(f"{args.clients} SSE clients connected")
        sent: list[float] = []
        web = psutil.Process(args.web_pid)
        web.cpu_percent()
        storm_thread = threading.Thread(target=storm, args=(url, args.rate, args.seconds, sent))
        began = time.monotonic()
        storm_thread.start()
        peak_rss = 0
        while storm_thread.is_alive():
            peak_rss = max(peak_rss, web.memory_info().rss)
            await asyncio.sleep(0.5)
        cpu = web.cpu_percent()
        elapsed = time.monotonic() - began
        await asyncio.sleep(1)  # the last flush
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    delays = []
    for batch_at in sent[:: max(1, len(sent) // 200)]:  # up to 200 sampled changes
        for client in ticks:
            i = bisect.bisect_left(client, batch_at)
            if i < len(client):
                delays.append(client[i] - batch_at)
    per_second = [sum(1 for x in t if x <= began + elapsed) / elapsed for t in ticks]
    print(f"notifications: {len(sent) * BATCH:,} in {elapsed:.1f} s "
          f"({len(sent) * BATCH / elapsed:,.0f}/s)")  # fmt: skip
    print(f"ticks per client per second: p50 {percentile(per_second, 0.5):.1f}, "
          f"max {max(per_second):.1f}")  # fmt: skip
    print(f"change -> client delay: p50 {percentile(delays, 0.5) * 1000:.0f} ms, "
          f"p99 {percentile(delays, 0.99) * 1000:.0f} ms")  # fmt: skip
    print(f"web process: CPU {cpu:.0f}% of one core, peak RSS {peak_rss / 2**20:.0f} MB")


def listeners(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND datname = current_database()",
            [LISTENER_NAME],
        ).fetchone()
    return int(row[0]) if row else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with scratch_database("sundial_bench_sse") as url:
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            users.create_user(conn, "bench", PASSWORD, "viewer", actor="bench")
        port = args.port or _free_port()
        web = start_web(url, port)
        args.web_pid = web.pid
        try:
            base = f"http://127.0.0.1:{port}"
            asyncio.run(measure(base, sign_in(base), args, url))
            print(f"LISTEN connections of the web process: {listeners(url)}")
        finally:
            web.terminate()
            web.wait(30)
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


if __name__ == "__main__":
    raise SystemExit(main())
