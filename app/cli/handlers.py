"""`sundial shell-handler enable|disable|status`: the fleet's decision about `shell`."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from app.core.config import Settings
from app.core.db import resolve_database_url, transaction
from app.handlers.gate import set_shell_enabled, shell_enabled


def cmd_shell_handler(args: argparse.Namespace, settings: Settings) -> int:
    with transaction(resolve_database_url(settings)) as conn:
        if args.action != "status":
            set_shell_enabled(conn, args.action == "enable", actor=f"cli:{getpass.getuser()}")
        enabled = shell_enabled(conn)
    state = "enabled" if enabled else "disabled"
    print(f"the shell handler is {state} for every worker and submitter")
    return 0


def add_handler_commands(sub: Any) -> None:
    shell = sub.add_parser(
        "shell-handler",
        help="enable, disable or show the built-in shell handler, for the whole deployment",
        description="The built-in shell handler runs commands named in job arguments. It is "
        "off until an admin enables it here; submits, schedules, job definitions and "
        "workflows that use it are refused while it is off, and workers refuse to run it.",
    )
    shell.set_defaults(func=cmd_shell_handler, process="shell-handler")
    shell.add_argument("action", choices=["enable", "disable", "status"])
