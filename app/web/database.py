"""How the async web reaches the synchronous domain functions.

Decided once: the web process holds one *synchronous* psycopg pool, and every handler
calls domain functions (the same ones the CLI calls, on the same kind of connection)
through `call`, which runs them in Starlette's thread pool. One connection type, one set of
functions, no async twin of any rule. Pages read through named queries the same way.

A pool checks each connection before lending it and waits at most
`ACQUIRE_TIMEOUT_SECONDS` for one, so with the database down a page fails fast with a
readable 503 (see `app.web.errors`) instead of hanging.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from app.core.db import Conn, connection_options

P = ParamSpec("P")
T = TypeVar("T")

ACQUIRE_TIMEOUT_SECONDS = 3.0
CONNECT_TIMEOUT_SECONDS = 3
POOL_MAX_SIZE = 8


def make_pool(database_url: str) -> ConnectionPool[Conn]:
    return ConnectionPool(
        database_url,
        min_size=1,
        max_size=POOL_MAX_SIZE,
        timeout=ACQUIRE_TIMEOUT_SECONDS,
        check=ConnectionPool.check_connection,
        kwargs={
            "autocommit": True,
            "row_factory": dict_row,
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            **connection_options(),
        },
        open=False,
    )


async def call(
    request: HTTPConnection,
    fn: Callable[Concatenate[Conn, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """`fn(conn, *args, **kwargs)` on a pooled connection, in a worker thread."""
    pool: ConnectionPool[Conn] = request.app.state.pool

    def with_connection() -> T:
        with pool.connection() as conn:
            return fn(conn, *args, **kwargs)

    return await run_in_threadpool(with_connection)
