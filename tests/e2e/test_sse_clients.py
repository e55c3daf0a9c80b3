"""Hundreds of SSE clients (httpx streams) against a real `sundial web`: they share one
LISTEN connection, and a client that never reads delays nobody. (No browser here: the
browser fixture keeps an event loop in the thread, and these tests run their own.)"""

from __future__ import annotations

import asyncio
import re
import socket
import time

import httpx2 as httpx
import psycopg

from tests.helpers.commands import free_port
from tests.helpers.live import Start, listener_count, start_web, submit
from tests.helpers.people import PASSWORD, make_user
from tests.helpers.waits import wait_until


def _session_cookies(base: str, name: str) -> dict[str, str]:
    with httpx.Client(base_url=base) as client:
        login = client.get("/login")
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', login.text)
        assert token
        response = client.post(
            "/login", data={"username": name, "password": PASSWORD, "csrf_token": token[1]}
        )
        assert response.status_code in (200, 303)
        return dict(client.cookies)


async def _stream_ticks(
    client: httpx.AsyncClient,
    ready: asyncio.Event,
    got: list[float],
    wanted: int,
    arrived: asyncio.Queue[float] | None = None,
) -> None:
    """Read `event: runs` ticks: the first (a new subscription's refresh) sets `ready`; the
    arrival time of each later one is appended to `got` (and put in `arrived`)."""
    async with client.stream("GET", "/events?topics=runs") as response:
        assert response.status_code == 200
        first = True
        async for line in response.aiter_lines():
            if line != "event: runs":
                continue
            if first:
                first = False
                ready.set()
                continue
            got.append(time.monotonic())
            if arrived is not None:
                arrived.put_nowait(got[-1])
            if len(got) >= wanted:
                return


def test_200_sse_clients_share_one_listen_connection(start: Start, db_url: str) -> None:
    port = free_port()
    start_web(start, port)
    base = f"http://127.0.0.1:{port}"
    make_user(db_url, "oncall", "viewer")
    cookies = _session_cookies(base, "oncall")
    wait_until(lambda: listener_count(db_url) == 1, "the web process to LISTEN")

    async def scenario() -> list[float]:
        limits = httpx.Limits(max_connections=250)
        async with httpx.AsyncClient(
            base_url=base, cookies=cookies, timeout=30, limits=limits
        ) as client:
            readies = [asyncio.Event() for _ in range(200)]
            arrivals: list[list[float]] = [[] for _ in range(200)]
            tasks = [
                asyncio.create_task(_stream_ticks(client, readies[i], arrivals[i], 1))
                for i in range(200)
            ]
            await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
            assert await asyncio.to_thread(listener_count, db_url) == 1
            sent = time.monotonic()
            await asyncio.to_thread(submit, db_url)
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
            return sorted(a[0] - sent for a in arrivals)

    delays = asyncio.run(scenario())
    assert len(delays) == 200
    p50, p99 = delays[100], delays[197]
    print(
        f"200 SSE clients, one LISTEN: tick delay p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
    )
    assert p99 < 2.0
    assert listener_count(db_url) == 1


def test_a_client_that_never_reads_delays_nobody(start: Start, db_url: str) -> None:
    port = free_port()
    start_web(start, port)
    base = f"http://127.0.0.1:{port}"
    make_user(db_url, "oncall", "viewer")
    cookies = _session_cookies(base, "oncall")
    cookie_header = "; ".join(f"{k}={v}" for k, v in cookies.items())
    stuck = socket.create_connection(("127.0.0.1", port))
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    stuck.sendall(
        f"GET /events?topics=runs HTTP/1.1\r\nHost: x\r\nCookie: {cookie_header}\r\n\r\n".encode()
    )

    async def scenario() -> list[float]:
        async with httpx.AsyncClient(base_url=base, cookies=cookies, timeout=30) as client:
            ready, arrivals, arrived = asyncio.Event(), [], asyncio.Queue[float]()
            task = asyncio.create_task(_stream_ticks(client, ready, arrivals, 1000, arrived))
            await asyncio.wait_for(ready.wait(), 30)
            delays = []
            for _ in range(3):
                await asyncio.to_thread(_storm, db_url, 2000)
                while not arrived.empty():  # the storm's own ticks
                    arrived.get_nowait()
                sent = time.monotonic()
                await asyncio.to_thread(submit, db_url)
                delays.append(await asyncio.wait_for(arrived.get(), 10) - sent)
            task.cancel()
            return delays

    try:
        delays = asyncio.run(scenario())
    finally:
        stuck.close()
    print("with a client that never reads, ticks reached another after", delays)
    assert max(delays) < 1.0


def _storm(db_url: str, n: int) -> None:
    """`n` notifications on the runs channel, each its own transaction."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        for _ in range(n):
            conn.execute("SELECT pg_notify('sundial_runs', '')")
