"""The event stream under load: `--clients` SSE clients (default 1,000) on one real
`sundial web` process while `--rate` run-change notifications a second (default 5,000)
arrive for `--seconds` (default 20).

The load comes from other processes than the measurement, so neither is the bottleneck:
`--generators` processes (default 4), each on its own connection, send their share of the
notifications, paced, in transactions of `BATCH` distinct payloads; `--client-procs`
processes (default 4) read the streams, each over plain asyncio sockets (uvloop).

Prints the achieved notification rate (and how full PostgreSQL's notification queue got:
it fills when the listener falls behind), the ticks each client received per second (the
hub coalesces: at most four), the delivery delay of a change to the clients (the wait for
the next flush plus transport: from each notification batch's commit to the first tick
every client got after it), p50/p99, the web process's CPU and peak memory, its database
connections and LISTEN connections (one), and the load average.

    python -m bench.sse
    python -m bench.sse --clients 50 --rate 500 --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

import httpx2 as httpx
import psutil
import psycopg
from psycopg.rows import dict_row

from app.people import users
from app.web.events import LISTENER_NAME
from bench.bench_db import scratch_database

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "benchmark password"
BATCH = 50  # notifications per transaction (distinct payloads: PostgreSQL keeps them all)
TICK_LINE = b"event: runs\r\n"


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


def sign_in(base: str) -> str:
    """The Cookie header of a signed-in viewer."""
    with httpx.Client(base_url=base) as client:
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', client.get("/login").text)
        assert token
        client.post("/login", data={"username": "bench", "password": PASSWORD,
                                    "csrf_token": token[1]})  # fmt: skip
        return "; ".join(f"{k}={v}" for k, v in client.cookies.items())


# ---- the storm: one process per generator -------------------------------------------------


def generate(url: str, index: int, rate: float, seconds: float, pipe: Connection) -> None:
    """Once connected, says so and waits for the start (a monotonic instant); then `rate`
    notifications a second for `seconds`, in transactions of BATCH; sends back the commit
    time of each transaction."""
    sent: list[float] = []
    with psycopg.connect(url, autocommit=True) as conn:
        statement = "SELECT pg_notify('sundial_runs', %s || g::text) FROM generate_series(1, %s) g"
        interval = BATCH / rate
        prefix = f"{index}:"
        pipe.send("connected")
        start_at: float = pipe.recv()
        time.sleep(max(0.0, start_at - time.monotonic()))
        n = 0
        while time.monotonic() - start_at < seconds:
            conn.execute(statement, [prefix, BATCH])
            sent.append(time.monotonic())
            n += 1
            pause = start_at + n * interval - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    pipe.send(sent)
    pipe.close()


# ---- the browsers: one process per share of the clients ------------------------------------


async def read_ticks(port: int, cookie: str, ticks: list[float], ready: asyncio.Event,
                     stop: asyncio.Event) -> None:  # fmt: skip
    """One SSE stream over a plain socket; the arrival of each tick after the first (a new
    subscription's refresh, which sets `ready`) in `ticks`."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**16)
    writer.write(
        f"GET /events?topics=runs HTTP/1.1\r\nHost: bench\r\nCookie: {cookie}\r\n\r\n".encode()
    )
    first = True
    try:
        while not stop.is_set():
            line = await reader.readline()  # chunk sizes and SSE lines alike
            if not line:
                raise ConnectionError("the web process closed an event stream")
            if line == TICK_LINE:
                if first:
                    first = False
                    ready.set()
                else:
                    ticks.append(time.monotonic())
    finally:
        writer.close()


async def client_share(port: int, cookie: str, count: int, ready: Event, stop: Event,
                       out: Connection) -> None:  # fmt: skip
    ticks: list[list[float]] = [[] for _ in range(count)]
    readies = [asyncio.Event() for _ in range(count)]
    stopping = asyncio.Event()
    tasks = []
    for i in range(count):
        tasks.append(asyncio.create_task(read_ticks(port, cookie, ticks[i], readies[i], stopping)))
        if i % 50 == 49:
            await asyncio.sleep(0.05)  # do not flood the listen backlog
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 300)
    for t in ticks:
        t.clear()
    ready.set()
    await asyncio.to_thread(stop.wait)
    stopping.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    out.send(ticks)
    out.close()


def clients(port: int, cookie: str, count: int, ready: Event, stop: Event,
            out: Connection) -> None:  # fmt: skip
    try:
        import uvloop

        uvloop.run(client_share(port, cookie, count, ready, stop, out))
    except ImportError:
        asyncio.run(client_share(port, cookie, count, ready, stop, out))


# ---- measuring -------------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


def queue_usage(url: str) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_notification_queue_usage()").fetchone()
    return float(row[0]) if row else 0.0


def listeners(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND datname = current_database()",
            [LISTENER_NAME],
        ).fetchone()
    return int(row[0]) if row else 0


def database_connections(web: psutil.Process) -> int:
    """The web process's open TCP connections to PostgreSQL's port."""
    return sum(1 for c in web.net_connections("tcp") if c.raddr and c.raddr.port == 5432)


def measure(port: int, cookie: str, url: str, web: psutil.Process,
            args: argparse.Namespace) -> None:  # fmt: skip
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    shares = [args.clients // args.client_procs + (i < args.clients % args.client_procs)
              for i in range(args.client_procs)]  # fmt: skip
    readers, readies = [], []
    for count in shares:
        ready = ctx.Event()
        mine, theirs = ctx.Pipe(duplex=False)
        ctx.Process(target=clients, args=(port, cookie, count, ready, stop, theirs)).start()
        readers.append(mine)
        readies.append(ready)
    for ready in readies:
        if not ready.wait(300):
            raise SystemExit("the clients did not all connect")
    print(f"{args.clients} SSE clients connected ({args.client_procs} processes); "
          f"web process: {database_connections(web)} database connections")  # fmt: skip
    storms = []
    for i in range(args.generators):
        mine, theirs = ctx.Pipe()
        share = args.rate / args.generators
        ctx.Process(target=generate, args=(url, i, share, args.seconds, theirs)).start()
        storms.append(mine)
    for storm in storms:
        storm.recv()  # connected
    start_at = time.monotonic() + 0.5
    for storm in storms:
        storm.send(start_at)
    time.sleep(max(0.0, start_at - time.monotonic()))
    web.cpu_percent()
    load_before = os.getloadavg()[0]
    peak_rss, peak_queue = 0, 0.0
    while time.monotonic() < start_at + args.seconds:
        peak_rss = max(peak_rss, web.memory_info().rss)
        peak_queue = max(peak_queue, queue_usage(url))
        time.sleep(0.5)
    cpu = web.cpu_percent()
    sent = sorted(t for storm in storms for t in storm.recv())
    elapsed = (sent[-1] if sent else time.monotonic()) - start_at
    time.sleep(1)  # the last flush
    load = os.getloadavg()
    stop.set()
    ticks = [t for reader in readers for t in reader.recv()]
    delays = []
    for batch_at in sent[:: max(1, len(sent) // 400)]:  # up to 400 sampled changes
        for client in ticks:
            i = bisect.bisect_left(client, batch_at)
            if i < len(client):
                delays.append(client[i] - batch_at)
    window = args.seconds
    per_second = [sum(1 for x in t if start_at <= x <= start_at + window) / window for t in ticks]
    print(f"notifications: {len(sent) * BATCH:,} in {elapsed:.1f} s "
          f"({len(sent) * BATCH / elapsed:,.0f}/s from {args.generators} connections); "
          f"notification queue at most {peak_queue:.2%} full")  # fmt: skip
    print(f"ticks per client per second: p50 {percentile(per_second, 0.5):.1f}, "
          f"min {min(per_second):.1f}, max {max(per_second):.1f}")  # fmt: skip
    print(f"change -> client delay: p50 {percentile(delays, 0.5) * 1000:.0f} ms, "
          f"p99 {percentile(delays, 0.99) * 1000:.0f} ms ({len(delays):,} samples)")  # fmt: skip
    print(f"web process: CPU {cpu:.0f}% of one core, peak RSS {peak_rss / 2**20:.0f} MB")
    print(f"load average: {load_before:.1f} at the start, {load[0]:.1f} at the end "
          f"({os.cpu_count()} cores)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--generators", type=int, default=4)
    parser.add_argument("--client-procs", type=int, default=4)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with scratch_database("sundial_bench_sse") as url:
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            users.create_user(conn, "bench", PASSWORD, "viewer", actor="bench")
        port = args.port or _free_port()
        web = start_web(url, port)
        try:
            cookie = sign_in(f"http://127.0.0.1:{port}")
            measure(port, cookie, url, psutil.Process(web.pid), args)
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
