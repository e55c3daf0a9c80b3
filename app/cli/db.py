"""`sundial migrate` and `sundial db url|stop`, and the database check every command makes.

Alembic is imported inside the commands that use it (start-up cost of every command).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from app.core.config import Settings
from app.core.db import resolve_database_url
from app.core.errors import UsageError


def service_database(settings: Settings) -> str:
    """The URL a command uses, once the database answers and its schema is the one this
    version needs: a clear error now beats UndefinedTable later, or a command failing
    half-way through."""
    from app.core.schema_check import schema_is_current

    url = resolve_database_url(settings)
    if schema_is_current(url):  # one connection, no Alembic: what a service start needs
        return url
    from app.core.db import check_database
    from app.core.migrate import ensure_current

    check_database(url)
    ensure_current(url)
    return url


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from app.core import migrate
    from app.core.db import check_database

    url = resolve_database_url(settings)
    check_database(url)
    before = migrate.current_revision(url)
    if args.down_to:
        if args.down_to == before:
            print(f"database is already at revision {before}")
            return 0
        if not migrate.is_before(args.down_to, before):
            raise UsageError(
                f"--down-to {args.down_to} is not a revision before this database's "
                f"({before or 'empty'}): see migrations/versions"
            )
        migrate.downgrade(url, args.down_to)
        print(f"took database back from {before} to revision {args.down_to}")
        return 0
    migrate.upgrade(url)
    after = migrate.current_revision(url)
    if before == after:
        print(f"database is up to date (revision {after})")
    else:
        print(f"migrated database from {before or 'empty'} to revision {after}")
    if args.then_wait and not os.environ.get("DYNO", "").startswith("release."):
        sys.stdout.flush()
        _wait_until_stopped()
    return 0


def _wait_until_stopped() -> None:
    """Sleep until SIGTERM or SIGINT (a Procfile runner stopping everything)."""
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    while not stopped.wait(1):
        pass


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from app.core.db import stop_embedded

    if args.db_command == "url":
        print(resolve_database_url(settings))
        return 0
    if settings.database_url:
        raise UsageError("DATABASE_URL is set: there is no embedded database to stop")
    stopped = stop_embedded(settings.data_dir)
    print("embedded database stopped" if stopped else "embedded database was not running")
    return 0


def add_migrate_command(sub: Any) -> None:
    text = "apply database migrations (safe to run repeatedly)"
    migrate = sub.add_parser("migrate", help=text, description=text)
    migrate.add_argument(
        "--then-wait",
        action="store_true",
        help="then keep running until stopped, except in Heroku's release phase: the "
        "Procfile's release line, so that honcho or foreman (which stop every process once one "
        "exits) keep the others running",
    )
    migrate.add_argument(
        "--down-to",
        metavar="REVISION",
        help="take the database back to an earlier revision instead (a rollback: stop "
        "every process first; see docs/operations.md)",
    )
    migrate.set_defaults(func=cmd_migrate, process="migrate")


def add_db_command(sub: Any) -> None:
    text = "embedded database helpers"
    db = sub.add_parser("db", help=text, description=text)
    db.set_defaults(func=cmd_db, process="db")
    db.add_argument("db_command", choices=["url", "stop"], help="print its URL, or stop it")
