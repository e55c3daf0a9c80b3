"""`sundial createuser NAME --role ROLE`, and the one-time sign-in link of `sundial dev`."""

from __future__ import annotations

import argparse
import getpass
import secrets
import sys
from dataclasses import dataclass
from typing import Any

from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.core.errors import UsageError
from app.people import audit, users
from app.people.roles import Role

DEV_ADMIN = "admin"


def read_password(from_stdin: bool) -> str:
    """The new password: one line of standard input, or typed twice at a prompt."""
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    password = getpass.getpass("Password: ")
    if getpass.getpass("Password again: ") != password:
        raise UsageError("the two passwords differ")
    return password


def cmd_createuser(args: argparse.Namespace, settings: Settings) -> int:
    password = read_password(args.password_stdin)
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        user = users.create_user(conn, args.name, password, args.role, actor=audit.cli_actor())
    print(f"user {user.username!r} created with role {user.role.value}")
    return 0


@dataclass(frozen=True)
class DevSignIn:
    link: str  # one-time, valid 15 minutes
    new_password: str | None  # the admin's password when this start created the admin


def dev_sign_in(url: str, secret_key: str, port: int) -> DevSignIn:
    """A one-time link signing in the local admin of `sundial dev`; the admin is created
    on the first start only, with a random password returned that once (it is stored
    hashed: no later start can show it again)."""
    password = None
    with connect(url, autocommit=True) as conn:
        admin = users.find_user(conn, DEV_ADMIN)
        if admin is None:
            password = secrets.token_urlsafe(12)
            admin = users.create_user(
                conn, DEV_ADMIN, password, Role.ADMIN.value, actor="sundial dev"
            )
        token = users.create_sign_in_link(conn, admin, secret_key)
    return DevSignIn(f"http://localhost:{port}/login/link?token={token}", password)


def dev_sign_in_link(url: str, secret_key: str, port: int) -> str:
    """Only the link of `dev_sign_in`."""
    return dev_sign_in(url, secret_key, port).link


def add_user_commands(sub: Any) -> None:
    p = sub.add_parser(
        "createuser",
        help="create a dashboard user with a role",
        description="Create a dashboard user. Roles, each allowing what the previous ones "
        "do: viewer (reads), operator (runs now, pauses, retries, cancels), editor (changes "
        "jobs, schedules, workflows), admin (users, dangerous handlers such as shell).",
    )
    p.set_defaults(func=cmd_createuser, process="createuser")
    p.add_argument("name", help="user name")
    p.add_argument("--role", required=True, choices=[r.value for r in Role])
    p.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of standard input instead of a prompt",
    )
