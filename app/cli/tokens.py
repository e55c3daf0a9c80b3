"""`sundial token create|list|revoke`: API tokens from the shell (admins' business, like
the dashboard's API tokens page; both call `app.people.tokens`)."""

from __future__ import annotations

import argparse
from typing import Any

from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.people.roles import TokenScope


def cmd_token(args: argparse.Namespace, settings: Settings) -> int:
    from app.people import audit, tokens

    with connect(resolve_database_url(settings), autocommit=True) as conn:
        if args.token_command == "create":
            lifetime = tokens.parse_lifetime(args.expires) if args.expires else None
            made = tokens.create(
                conn, args.user, args.scope, name=args.name or f"{args.user}-{args.scope}",
                actor=audit.cli_actor(), lifetime=lifetime,
            )  # fmt: skip
            expiry = made.expires_at.isoformat() if made.expires_at else "never"
            print(made.secret)
            print(f"(token {made.id} for {args.user}, scope {args.scope}, expires {expiry}: "
                  "copy it now, it is not shown again)")  # fmt: skip
        elif args.token_command == "revoke":
            tokens.revoke(conn, args.id, actor=audit.cli_actor())
            print(f"API token {args.id} revoked")
        else:
            for t in tokens.list_all(conn):
                state = "revoked" if t["revoked_at"] else "active" if t["active"] else "expired"
                last = t["last_used_at"].isoformat() if t["last_used_at"] else "never"
                print(f"{t['id']}\t{t['prefix']}…\t{t['username']}\t{t['scope']}\t{state}\t"
                      f"last used {last}\t{t['name']}")  # fmt: skip
    return 0


def add_token_commands(sub: Any) -> None:
    p = sub.add_parser(
        "token",
        help="create, list or revoke API tokens",
        description="API tokens for the JSON API. A token acts as its user, with that "
        "user's role, limited to its scope (read: only reads; write: also changes). The "
        "secret is printed once; Sundial keeps only its SHA-256.",
    )
    p.set_defaults(func=cmd_token, process="token")
    commands = p.add_subparsers(dest="token_command", required=True)
    create = commands.add_parser("create", help="create a token and print it once")
    create.add_argument("--user", required=True, help="the user the token acts as")
    create.add_argument("--scope", required=True, choices=[s.value for s in TokenScope])
    create.add_argument("--expires", help="lifetime like 30d, 12h or 90m (default: never)")
    create.add_argument("--name", help="what uses it (default: USER-SCOPE)")
    commands.add_parser("list", help="list tokens (never their secrets)")
    revoke = commands.add_parser("revoke", help="stop a token at once")
    revoke.add_argument("id", type=int, help="the token's number (see `sundial token list`)")
