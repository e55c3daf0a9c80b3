"""People who sign in: accounts (argon2 hashes), sessions, one-time links, rate limiting.

A browser holds a random token; the database keeps only its HMAC under SECRET_KEY, so a
copy of the sessions table opens no session and changing the key signs everyone out.
Failed sign-ins are counted in the database per user name and address, so every web
process behind a load balancer enforces the same limit.

    with transaction(url) as conn:
        create_user(conn, "alice", "a long passphrase", Role.ADMIN, actor="cli")
        user = sign_in(conn, "alice", "a long passphrase", address="10.0.0.1")
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from argon2 import PasswordHasher, profiles
from argon2.exceptions import InvalidHashError, VerificationError

from app.core.config import password_hash_cost
from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import query
from app.people import audit
from app.people.roles import Role

SESSION_LIFETIME_SECONDS = 12 * 3600
SIGN_IN_LINK_LIFETIME_SECONDS = 15 * 60
LOGIN_WINDOW_SECONDS = 15 * 60
LOGIN_MAX_FAILURES = 5  # per user name and address within the window
# From one address whatever the names (password spraying), and for one name whatever the
# addresses (a guess spread over many machines); high enough that a person never meets them.
LOGIN_MAX_FAILURES_PER_ADDRESS = 20
LOGIN_MAX_FAILURES_PER_ACCOUNT = 50
MIN_PASSWORD_LENGTH = 8
MAX_NAME_LENGTH = 100


@cache
def _hasher_of(cost: str) -> PasswordHasher:
    return (
        PasswordHasher.from_parameters(profiles.CHEAPEST) if cost == "minimum" else PasswordHasher()
    )


def _hasher() -> PasswordHasher:
    """argon2id at its standard cost (RFC 9106's low-memory profile: 64 MiB, 3 passes),
    or at its cheapest where SUNDIAL_PASSWORD_HASH_COST=minimum (test suites). A hash
    keeps its own cost: a cheap one is rehashed at the standard cost on its next sign-in."""
    return _hasher_of(password_hash_cost())


def dummy_hash() -> str:
    """Verified when the name is unknown, so a guess at a name costs as long as one at a
    password. Made on first use (a hash takes 0.1-0.2 s, which every command importing
    this module paid); the web process makes it at start-up, before any sign-in."""
    return _dummy_hash_of(password_hash_cost())


@cache
def _dummy_hash_of(cost: str) -> str:
    return _hasher_of(cost).hash(secrets.token_urlsafe(16))


class UserError(UsageError):
    """A user cannot be created as asked; the message says why."""


class TooManyAttempts(UsageError):
    """Sign-in refused for a while after repeated failures."""


@dataclass(frozen=True, slots=True)
class User:
    id: int
    username: str
    role: Role

    def may(self, needed: Role) -> bool:
        return self.role.allows(needed)


def _user(row: dict[str, Any]) -> User:
    return User(id=row["id"], username=row["username"], role=Role(row["role"]))


def create_user(conn: Conn, username: str, password: str, role: str, *, actor: str) -> User:
    """A new account; refuses a taken or blank name, a short password, an unknown role."""
    username = username.strip()
    if not username or len(username) > MAX_NAME_LENGTH or not username.isprintable():
        raise UserError(f"a user name is 1 to {MAX_NAME_LENGTH} printable characters")
    if role not in {r.value for r in Role}:
        raise UserError(f"role must be one of {', '.join(r.value for r in Role)}, not {role!r}")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
    with conn.transaction():
        row = conn.execute(
            query("users", "user_insert"),
            {"username": username, "password_hash": _hasher().hash(password), "role": role},
        ).fetchone()
        if row is None:
            raise UserError(f"a user named {username!r} already exists")
        audit.record(
            conn, actor, "user.create", "user", username, after={"username": username, "role": role}
        )
    return _user(row)


def sign_in(
    conn: Conn, username: str, password: str, *, address: str, now: datetime | None = None
) -> User | None:
    """The user when the password is right; None otherwise. Raises TooManyAttempts after
    LOGIN_MAX_FAILURES failures for this name from this address within the window, or too
    many from this address or for this name overall (see the limits above)."""
    key = {
        "username": username,
        "address": address,
        "window_seconds": LOGIN_WINDOW_SECONDS,
        "now": now,
    }
    failures = conn.execute(query("users", "login_failure_count"), key).fetchone()
    if failures is not None:
        _refuse_when_over_limits(failures)
    row = conn.execute(query("users", "user_by_name"), {"username": username}).fetchone()
    if row is None or row["disabled"] or not _verify(row["password_hash"], password):
        conn.execute(query("users", "login_failure_insert"), key)
        return None
    conn.execute(query("users", "login_failure_clear"), key)
    if _hasher().check_needs_rehash(row["password_hash"]):
        conn.execute(
            query("users", "user_set_password_hash"),
            {"id": row["id"], "password_hash": _hasher().hash(password)},
        )
    return _user(row)


def _refuse_when_over_limits(failures: dict[str, Any]) -> None:
    if failures["pair"] >= LOGIN_MAX_FAILURES:
        raise TooManyAttempts(
            "too many failed sign-ins for this name from your address: wait 15 minutes"
        )
    if failures["from_address"] >= LOGIN_MAX_FAILURES_PER_ADDRESS:
        raise TooManyAttempts(
            "too many failed sign-ins from your address, for several names: wait 15 minutes"
        )
    if failures["for_account"] >= LOGIN_MAX_FAILURES_PER_ACCOUNT:
        raise TooManyAttempts(
            "too many failed sign-ins for this name from many addresses: it is locked for "
            "15 minutes"
        )


def _verify(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher().verify(password_hash or dummy_hash(), password)
    except (VerificationError, InvalidHashError):
        return False


def _key(secret_key: str, token: str) -> str:
    return hmac.new(secret_key.encode(), token.encode(), hashlib.sha256).hexdigest()


def start_session(conn: Conn, user: User, secret_key: str, *, now: datetime | None = None) -> str:
    """A new session for `user`; returns the token for the cookie."""
    token = secrets.token_urlsafe(32)
    conn.execute(
        query("users", "session_insert"),
        {
            "id": _key(secret_key, token),
            "user_id": user.id,
            "lifetime_seconds": SESSION_LIFETIME_SECONDS,
            "now": now,
        },
    )
    return token


def session_user(
    conn: Conn, token: str, secret_key: str, *, now: datetime | None = None
) -> User | None:
    params = {"id": _key(secret_key, token), "now": now}
    row = conn.execute(query("users", "session_user"), params).fetchone()
    return _user(row) if row else None


def end_session(conn: Conn, token: str, secret_key: str, *, now: datetime | None = None) -> None:
    """Sign out (and drop expired sessions while here)."""
    conn.execute(query("users", "session_delete"), {"id": _key(secret_key, token), "now": now})


def create_sign_in_link(
    conn: Conn, user: User, secret_key: str, *, now: datetime | None = None
) -> str:
    """A token that signs `user` in once, within SIGN_IN_LINK_LIFETIME_SECONDS."""
    token = secrets.token_urlsafe(32)
    conn.execute(
        query("users", "sign_in_link_insert"),
        {
            "id": _key(secret_key, token),
            "user_id": user.id,
            "lifetime_seconds": SIGN_IN_LINK_LIFETIME_SECONDS,
            "now": now,
        },
    )
    return token


def use_sign_in_link(
    conn: Conn, token: str, secret_key: str, *, now: datetime | None = None
) -> User | None:
    row = conn.execute(
        query("users", "sign_in_link_use"), {"id": _key(secret_key, token), "now": now}
    ).fetchone()
    return _user(row) if row else None


def find_user(conn: Conn, username: str) -> User | None:
    row = conn.execute(query("users", "user_by_name"), {"username": username}).fetchone()
    return _user(row) if row else None
