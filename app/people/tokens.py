"""API tokens: bearer secrets that let a program use the JSON API as one of the users.

An admin creates a token for a user with a scope (`read`: GET only; `write`: also changes)
and an optional lifetime. The secret is shown once; the database keeps its SHA-256 (the
secret is 32 random bytes, so a plain hash is as strong as a slow one and costs nothing
per request). A token acts with its user's role AND its scope, never more than either.
Creating and revoking are audited; the last-used time is written at most once a minute.

    with transaction(url) as conn:
        made = create(conn, "deploy-bot", TokenScope.WRITE, name="ci", actor="alice")
        print(made.secret)  # once
        principal = authenticate(conn, made.secret)
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError, about
from app.core.sql import query
from app.people import audit
from app.people.roles import Role, TokenScope
from app.people.users import User

TOKEN_PREFIX = "sundial_"
PREFIX_SHOWN = len(TOKEN_PREFIX) + 6  # enough to tell a person's tokens apart
MAX_LIFETIME = timedelta(days=3650)
_LIFETIME = re.compile(r"^\s*(\d+)\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


class TokenError(UsageError):
    """A token cannot be created or revoked as asked; the message says why."""


@dataclass(frozen=True, slots=True)
class Created:
    id: int
    secret: str  # shown once, never stored
    prefix: str
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class Principal:
    """Who an API request acts as: the token's user, within the token's scope."""

    token_id: int
    user: User
    scope: TokenScope

    def may(self, needed: Role, *, writes: bool) -> bool:
        return self.user.may(needed) and (not writes or self.scope is TokenScope.WRITE)


class Refused(Exception):
    """The request's token does not let it in; `reason` is said to the caller (401)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_lifetime(text: str) -> timedelta:
    """`30d`, `12h` or `90m` as a duration (1 minute to 10 years)."""
    match = _LIFETIME.match(text)
    if not match:
        raise TokenError(f"a lifetime looks like 30d, 12h or 90m, not {text!r}", "lifetime")
    lifetime = timedelta(**{_UNITS[match[2]]: int(match[1])})
    if not timedelta(minutes=1) <= lifetime <= MAX_LIFETIME:
        raise TokenError("a token lives between 1 minute and 3650 days", "lifetime")
    return lifetime


def create(
    conn: Conn,
    username: str,
    scope: str,
    *,
    name: str,
    actor: str,
    lifetime: timedelta | None = None,
    now: datetime | None = None,
) -> Created:
    """A new token for `username`; the secret is in the result and nowhere else."""
    if scope not in {s.value for s in TokenScope}:
        raise TokenError(f"scope must be read or write, not {scope!r}", "scope")
    name = name.strip()
    with about("name"), limits.refused_as(TokenError):
        limits.check_text("the token's name", name, limits.MAX_NAME_LENGTH)
    if not name:
        raise TokenError(
            "give the token a name that says what uses it, e.g. billing-service", "name"
        )
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with conn.transaction():
        user = conn.execute(query("users", "user_by_name"), {"username": username}).fetchone()
        if user is None:
            raise TokenError(f"there is no user named {username!r}", "user")
        if user["disabled"]:
            raise TokenError(f"user {username!r} is disabled", "user")
        params = {
            "user_id": user["id"],
            "name": name,
            "token_hash": hash_secret(secret),
            "prefix": secret[:PREFIX_SHOWN],
            "scope": scope,
            "created_by": actor,
            "lifetime_seconds": lifetime.total_seconds() if lifetime else None,
            "now": now,
        }
        row = conn.execute(query("tokens", "token_insert"), params).fetchone()
        assert row is not None
        audit.record(
            conn, actor, "token.create", "token", str(row["id"]), after=_snapshot(row, username)
        )
    return Created(row["id"], secret, row["prefix"], row["expires_at"])


def authenticate(conn: Conn, secret: str, now: datetime | None = None) -> Principal:
    """The principal a bearer secret stands for; raises Refused (missing, unknown, expired,
    revoked, user disabled)."""
    if not secret:
        raise Refused("send an API token: Authorization: Bearer <token>")
    params = {"token_hash": hash_secret(secret), "now": now}
    row = conn.execute(query("tokens", "token_by_hash"), params).fetchone()
    if row is None:
        raise Refused("this API token is not valid")
    if row["revoked_at"] is not None:
        raise Refused("this API token was revoked")
    if row["expires_at"] is not None and row["expires_at"] <= row["now"]:
        raise Refused("this API token has expired")
    if row["disabled"]:
        raise Refused("the user of this API token is disabled")
    last = row["last_used_at"]
    if last is None or row["now"] - last >= timedelta(minutes=1):
        conn.execute(query("tokens", "token_touch"), {"id": row["id"], "now": now})
    user = User(id=row["user_id"], username=row["username"], role=Role(row["role"]))
    return Principal(row["id"], user, TokenScope(row["scope"]))


def list_all(conn: Conn, now: datetime | None = None) -> list[dict[str, Any]]:
    return conn.execute(query("tokens", "token_list"), {"now": now}).fetchall()


def row_of(conn: Conn, token_id: int, now: datetime | None = None) -> dict[str, Any] | None:
    """One token as `list_all` shows it, or None."""
    return conn.execute(query("tokens", "token_row"), {"id": token_id, "now": now}).fetchone()


def revoke(conn: Conn, token_id: int, *, actor: str, now: datetime | None = None) -> None:
    """Stop a token at once. Revoking a revoked token is refused with a message."""
    with conn.transaction():
        row = conn.execute(query("tokens", "token_revoke"), {"id": token_id, "now": now}).fetchone()
        if row is None:
            existing = conn.execute(query("tokens", "token_by_id"), {"id": token_id}).fetchone()
            if existing is None:
                raise TokenError(f"there is no API token {token_id}")
            raise TokenError(f"API token {token_id} was already revoked")
        audit.record(
            conn, actor, "token.revoke", "token", str(token_id),
            before=_snapshot(row, None), after=None,
        )  # fmt: skip


def _snapshot(row: dict[str, Any], username: str | None) -> dict[str, Any]:
    snap = {k: row[k] for k in ("name", "prefix", "scope", "expires_at")}
    if username is not None:
        snap["user"] = username
    return snap


def user_choices(conn: Conn) -> list[dict[str, Any]]:
    """Users a token can be made for (not disabled), with their roles."""
    return conn.execute(query("tokens", "token_user_choices")).fetchall()
