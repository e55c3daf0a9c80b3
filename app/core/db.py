"""Where the database is and how to reach it.

`resolve_database_url` turns configuration into one libpq URL: `DATABASE_URL` when set
(any of the spellings Heroku and SQLAlchemy use), otherwise the embedded PostgreSQL in
the data folder (`SUNDIAL_DATA_DIR`, else the user's `~/.local/share/sundial`), started on
first use and shared by every Sundial command of that user, whatever directory it runs in.

Behind a transaction-mode pooler (PgBouncer, Heroku's connection pooling;
`SUNDIAL_DATABASE_POOLER=transaction`) each transaction may run on a different server
connection, so nothing may outlive a transaction on the server: no prepared statements
(`connection_options`), no session-level locks, and LISTEN only on a direct connection
(`listen_url`).
"""

from __future__ import annotations

import functools
import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row

from app.core.config import Settings, database_pooler
from app.core.errors import UsageError
from app.core.sql import query

if TYPE_CHECKING:
    import sqlalchemy  # imported where an engine is made: workers never need it

# The one connection type of every domain function and service: dict rows.
Conn = psycopg.Connection[dict[str, Any]]

log = logging.getLogger(__name__)

EMBEDDED_DATABASE = "sundial"
CONNECT_TIMEOUT_SECONDS = 5
_ACCEPTED_SCHEMES = ("postgres", "postgresql", "postgresql+psycopg", "postgresql+psycopg3")


class DatabaseUrlError(ValueError):
    """DATABASE_URL is not a PostgreSQL URL Sundial understands."""


class DatabaseUnavailable(RuntimeError):
    """The database could not be reached; the message says where and why."""


def normalize_url(url: str) -> str:
    """Return the libpq form (`postgresql://…`) of any accepted PostgreSQL URL.

    >>> normalize_url("postgres://u:p@db:5432/app")
    'postgresql://u:p@db:5432/app'
    """
    url = url.strip()
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*)://", url)
    if not match:
        raise DatabaseUrlError(
            f"DATABASE_URL must look like postgresql://user:password@host:5432/dbname, "
            f"got {redact(url)!r}"
        )
    scheme = match.group(1).lower()
    if scheme not in _ACCEPTED_SCHEMES:
        raise DatabaseUrlError(
            f"DATABASE_URL must be a PostgreSQL URL (postgres://, postgresql:// or "
            f"postgresql+psycopg://), got scheme {scheme!r}"
        )
    return "postgresql://" + url[match.end() :]


def sqlalchemy_url(url: str) -> str:
    """The same database as `url`, spelled for SQLAlchemy with the psycopg 3 driver."""
    return "postgresql+psycopg://" + normalize_url(url).removeprefix("postgresql://")


def redact(url: str) -> str:
    """`url` with its password replaced, safe for logs and error messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def describe(url: str) -> str:
    """Human description of where `url` points, for error messages."""
    parts = urlsplit(url)
    host = parts.hostname or dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get(
        "host", "local socket"
    )
    port = f":{parts.port}" if parts.port else ""
    db = parts.path.lstrip("/") or "(default database)"
    return f"database {db!r} on {host}{port}"


def resolve_database_url(settings: Settings) -> str:
    """The libpq URL every process should use, starting the embedded server if needed."""
    if settings.database_url:
        return normalize_url(settings.database_url)
    return embedded_database_url((settings.data_dir / "pgdata").resolve())


@functools.cache  # one command asks more than once; the server is started once
def embedded_database_url(pgdata: Path) -> str:
    """Start (or join) the embedded PostgreSQL whose data is in `pgdata`; return its URL.

    The server outlives the process that started it, so web, worker, trigger and reaper
    started separately all share it; `sundial db stop` ends it.
    """
    pgserver = _import_pgserver()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = pgserver.get_server(pgdata, cleanup_mode=None)
    except Exception as exc:  # pgserver raises bare subprocess errors
        raise DatabaseUnavailable(
            f"could not start the embedded PostgreSQL in {pgdata}: {exc}. "
            f"Its log is {pgdata / 'log'}; set DATABASE_URL to use another server."
        ) from exc
    admin_url = str(server.get_uri())
    _ensure_database(admin_url, EMBEDDED_DATABASE)
    return str(server.get_uri(EMBEDDED_DATABASE))


def stop_embedded(data_dir: Path) -> bool:
    """Stop the embedded server in `data_dir`; False when none was running."""
    pgserver = _import_pgserver()
    pgdata = (data_dir / "pgdata").resolve()
    if not (pgdata / "postmaster.pid").exists():
        return False
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    server.cleanup()
    return True


def _import_pgserver() -> Any:
    """pgserver, imported lazily (only needed without DATABASE_URL) and quietly: on import
    it warns when XDG_RUNTIME_DIR is unset, which says nothing a Sundial user can act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            import pgserver
        except ImportError:
            raise UsageError(
                "DATABASE_URL is not set and the embedded PostgreSQL is not installed: set "
                "DATABASE_URL, or install it with `pip install 'sundial[dev]'`"
            ) from None

    return pgserver


def _ensure_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute(query("database", "database_exists"), {"name": name}).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def connection_options() -> dict[str, Any]:
    """The psycopg options of every connection Sundial opens (services, web pool, Alembic).

    psycopg prepares a statement on the server once it has run a few times; that speeds up
    direct connections, but behind a transaction-mode pooler the next transaction lands on
    another server connection ("prepared statement does not exist / already exists").
    """
    options: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_SECONDS}
    if database_pooler() == "transaction":
        options["prepare_threshold"] = None  # never prepare
    return options


def listen_url(settings: Settings, url: str) -> str | None:
    """Where to LISTEN for notifications: notifications reach the server connection that
    ran LISTEN, which a transaction-mode pooler does not keep linked to this client, so
    there it is the direct URL (SUNDIAL_DIRECT_DATABASE_URL), or None: poll only."""
    if settings.direct_database_url:
        return normalize_url(settings.direct_database_url)
    return None if settings.database_pooler == "transaction" else url


def connect(url: str, **kwargs: Any) -> Conn:
    """A psycopg connection with dict rows, or DatabaseUnavailable with a clear message."""
    try:
        return psycopg.connect(url, row_factory=dict_row, **connection_options(), **kwargs)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(_unavailable_message(url, exc)) from exc


async def connect_async(url: str, **kwargs: Any) -> psycopg.AsyncConnection[dict[str, Any]]:
    """The asyncio twin of `connect`."""
    try:
        return await psycopg.AsyncConnection.connect(
            url, row_factory=dict_row, **connection_options(), **kwargs
        )
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(_unavailable_message(url, exc)) from exc


def _unavailable_message(url: str, exc: Exception) -> str:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return f"cannot reach the {describe(url)}: {reason}"


def check_database(url: str) -> None:
    """Raise DatabaseUnavailable unless a trivial query succeeds."""
    with connect(url, autocommit=True) as conn:
        conn.execute(query("database", "database_ping"))


@contextmanager
def transaction(url: str) -> Iterator[Conn]:
    """A short-lived connection inside one transaction, for CLI commands and tests."""
    with connect(url) as conn, conn.transaction():
        yield conn


def make_engine(url: str, **kwargs: Any) -> sqlalchemy.Engine:
    """SQLAlchemy engine (psycopg 3 driver) for SQLModel sessions and Alembic."""
    import sqlalchemy

    return sqlalchemy.create_engine(
        sqlalchemy_url(url),
        pool_pre_ping=True,
        connect_args=connection_options(),
        **kwargs,
    )


def outside_transaction(conn: Conn) -> bool:
    """True on an autocommit connection outside any transaction: a statement sent now
    commits on its own (inside a caller's transaction, a savepoint keeps it undoable)."""
    return conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
