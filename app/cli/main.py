"""The `sundial` parser and its one way of ending: a result, or one sentence and a code.

Errors a person can fix (bad configuration, unreachable database, bad input) end with one
sentence on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from app.cli.db import add_db_command, add_migrate_command, service_database
from app.cli.services import SERVICE_COMMANDS, PortInUse, add_service_commands
from app.core.config import ConfigError, Settings
from app.core.db import DatabaseUnavailable, DatabaseUrlError
from app.core.errors import UsageError
from app.core.logs import configure_logging
from app.core.process_secrets import make_non_dumpable
from app.core.text import safe

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


# The other commands' groups, in the order `sundial --help` lists them, with the words each
# adds: a command's parser imports only its own group, since the whole parser imports every
# group and all they need (0.3 s of a command's start).
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "app.cli.runs:add_run_commands": ("submit", "dag", "runs", "cancel", "retry", "show"),
    "app.cli.schedules:add_schedule_commands": ("schedule",),
    "app.cli.jobs:add_job_commands": ("job",),
    "app.cli.workflows:add_workflow_commands": ("workflow",),
    "app.cli.handlers:add_handler_commands": ("shell-handler",),
    "app.cli.users:add_user_commands": ("createuser",),
    "app.cli.tokens:add_token_commands": ("token",),
    "app.cli.queues:add_queue_commands": ("queue",),
    "app.cli.breakers:add_breaker_commands": ("breaker",),
    "app.cli.notify:add_notify_commands": ("notify",),
    "app.cli.history:add_history_commands": ("history",),
}
Adder = Callable[[Any], None]  # adds its commands to the subparsers it is given


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; for a known `command` only its group's, so the process does not
    import what the other commands need (start-up cost)."""
    parser = Parser(
        prog="sundial",
        description="Sundial: reliable job scheduling on PostgreSQL, with a browser dashboard.",
        epilog="Configuration comes from the environment: DATABASE_URL (embedded PostgreSQL "
        "in $SUNDIAL_DATA_DIR or ~/.local/share/sundial when unset), PORT, SECRET_KEY and "
        "SUNDIAL_* settings (see docs/commands.md). Exit codes: 2 bad input or configuration, "
        "3 database unreachable, 4 port in use.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _adders_of(command):
        add(sub)
    return parser


def _adders_of(command: str | None) -> list[Adder]:
    """What adds `command`: its own group alone; every group for help or a word no command
    has, so that the parser says which exist."""
    if command in SERVICE_COMMANDS:
        return [add_service_commands]
    if command == "migrate":
        return [add_migrate_command]
    if command == "db":
        return [add_db_command]
    for group, words in COMMAND_GROUPS.items():
        if command in words:
            return [_adder(group)]
    everything = [add_migrate_command, add_service_commands, add_db_command]
    return everything + [_adder(group) for group in COMMAND_GROUPS]


def _adder(group: str) -> Adder:
    module, name = group.split(":")
    adder: Adder = getattr(importlib.import_module(module), name)
    return adder


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(words)
    try:
        settings = Settings.from_env()
        configure_logging(args.process, settings.log_level, settings.log_format)
        if args.command in SERVICE_COMMANDS:
            # long-running holders of the secrets: closed to what their jobs run (see
            # app.core.process_secrets)
            make_non_dumpable()
        if args.command not in CHECK_THEIR_OWN_SCHEMA:
            service_database(settings)
        command: Command = args.func
        code = int(command(args, settings))
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return code
    except (ConfigError, DatabaseUrlError, UsageError) as exc:
        return _error(args.command, exc, EXIT_USAGE)
    except DatabaseUnavailable as exc:
        return _error(args.command, exc, EXIT_UNAVAILABLE)
    except PortInUse as exc:
        return _error(args.command, exc, EXIT_PORT_IN_USE)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """`sundial runs | head`: the reader closed the pipe. End quietly, as other tools do,
    and keep the interpreter from complaining again when it flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def _error(command: str, exc: Exception, code: int) -> int:
    print(f"sundial {command}: error: {safe(exc)}", file=sys.stderr)
    return code
