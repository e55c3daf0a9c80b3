"""The `sundial` parser and its one way of ending: a result, or one sentence and a code.

Errors a person can fix (bad configuration, unreachable database, bad input) end with one
sentence on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from app.cli.db import add_db_command, add_migrate_command, service_database
from app.cli.services import SERVICE_COMMANDS, PortInUse, add_service_commands
from app.cli.text import safe
from app.config import ConfigError, Settings
from app.db import DatabaseUnavailable, DatabaseUrlError
from app.errors import UsageError
from app.logs import configure_logging

EXIT_USAGE = 2  # bad input or configuration
EXIT_UNAVAILABLE = 3  # the database could not be reached
EXIT_PORT_IN_USE = 4  # the dashboard's port is taken by another process

# Commands that need no migrated schema (or check it themselves); every other command
# refuses an unmigrated database up front with one sentence.
CHECK_THEIR_OWN_SCHEMA = frozenset({"migrate", "db", "dev", "web", "worker", "trigger", "reaper"})


Command = Callable[[argparse.Namespace, Settings], int]


class Parser(argparse.ArgumentParser):
    """argparse, with what a person typed escaped in its error (it quotes unknown words)."""

    def error(self, message: str) -> NoReturn:
        super().error(safe(message))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; for a service `command` (web, worker...) only that group's, so
    the process does not import what the other commands need (start-up cost)."""
    parser = Parser(
        prog="sundial",
        description="Sundial: reliable job scheduling on PostgreSQL, with a browser dashboard.",
        epilog="Configuration comes from the environment: DATABASE_URL (embedded PostgreSQL "
        "in $SUNDIAL_DATA_DIR or ~/.local/share/sundial when unset), PORT, SECRET_KEY and "
        "SUNDIAL_* settings (see README). Exit codes: 2 bad input or configuration, "
        "3 database unreachable, 4 port in use.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command in SERVICE_COMMANDS:
        add_service_commands(sub)
        return parser
    from app.cli.handlers import add_handler_commands
    from app.cli.jobs import add_job_commands
    from app.cli.runs import add_run_commands
    from app.cli.schedules import add_schedule_commands
    from app.cli.tokens import add_token_commands
    from app.cli.users import add_user_commands
    from app.cli.workflows import add_workflow_commands

    add_migrate_command(sub)
    add_service_commands(sub)
    add_db_command(sub)
    add_run_commands(sub)
    add_schedule_commands(sub)
    add_job_commands(sub)
    add_workflow_commands(sub)
    add_handler_commands(sub)
    add_user_commands(sub)
    add_token_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(words)
    try:
        settings = Settings.from_env()
        configure_logging(args.process, settings.log_level, settings.log_format)
        if args.command not in CHECK_THEIR_OWN_SCHEMA:
            service_database(settings)
        command: Command = args.func
        return int(command(args, settings))
    except (ConfigError, DatabaseUrlError, UsageError) as exc:
        return _error(args.command, exc, EXIT_USAGE)
    except DatabaseUnavailable as exc:
        return _error(args.command, exc, EXIT_UNAVAILABLE)
    except PortInUse as exc:
        return _error(args.command, exc, EXIT_PORT_IN_USE)
    except KeyboardInterrupt:
        return 130


def _error(command: str, exc: Exception, code: int) -> int:
    print(f"sundial {command}: error: {safe(exc)}", file=sys.stderr)
    return code
