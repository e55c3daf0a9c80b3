"""Passwords are hashed with argon2id at its standard cost unless SUNDIAL_PASSWORD_HASH_COST
says `minimum` (the test suite sets it: tests/conftest.py); a cheap hash is rehashed at the
standard cost the next time its owner signs in where the standard cost holds. Real database."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from argon2 import extract_parameters

from app.core.config import ConfigError, Settings
from app.people import users

PASSWORD = "a long passphrase"


def stored_hash(conn: psycopg.Connection[Any], name: str) -> str:
    row = conn.execute("SELECT password_hash FROM users WHERE username = %s", (name,)).fetchone()
    assert row is not None
    return str(row["password_hash"])


def test_the_standard_cost_holds_unless_the_minimum_is_asked_for(
    conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SUNDIAL_PASSWORD_HASH_COST")
    users.create_user(conn, "standard", PASSWORD, "viewer", actor="test")
    standard = extract_parameters(stored_hash(conn, "standard"))
    assert (standard.time_cost, standard.memory_cost, standard.parallelism) == (3, 65536, 4)
    assert standard.type.name == "ID"

    monkeypatch.setenv("SUNDIAL_PASSWORD_HASH_COST", "minimum")
    users.create_user(conn, "cheap", PASSWORD, "viewer", actor="test")
    cheap = extract_parameters(stored_hash(conn, "cheap"))
    assert cheap.memory_cost < standard.memory_cost and cheap.time_cost == 1
    # Either cost verifies the other's hashes: a hash carries its own parameters.
    assert users.sign_in(conn, "standard", PASSWORD, address="10.0.0.1") is not None
    assert users.sign_in(conn, "standard", "wrong password", address="10.0.0.1") is None


def test_a_cheap_hash_is_rehashed_at_the_standard_cost_on_its_next_sign_in(
    conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUNDIAL_PASSWORD_HASH_COST", "minimum")
    users.create_user(conn, "alice", PASSWORD, "viewer", actor="test")
    cheap = stored_hash(conn, "alice")

    monkeypatch.setenv("SUNDIAL_PASSWORD_HASH_COST", "standard")
    assert users.sign_in(conn, "alice", "wrong password", address="10.0.0.1") is None
    assert stored_hash(conn, "alice") == cheap  # a failed sign-in changes nothing
    signed_in = users.sign_in(conn, "alice", PASSWORD, address="10.0.0.1")
    assert signed_in is not None and signed_in.username == "alice"
    upgraded = extract_parameters(stored_hash(conn, "alice"))
    assert (upgraded.time_cost, upgraded.memory_cost) == (3, 65536)
    assert users.sign_in(conn, "alice", PASSWORD, address="10.0.0.1") is not None


@pytest.mark.parametrize("value", ["cheap", "0", "Minimum please"])
def test_an_unknown_cost_is_refused_at_start_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="SUNDIAL_PASSWORD_HASH_COST must be one of"):
        Settings.from_env({"SUNDIAL_PASSWORD_HASH_COST": value})
    assert Settings.from_env({}).password_hash_cost == "standard"
    assert Settings.from_env({"SUNDIAL_PASSWORD_HASH_COST": " MINIMUM "}).password_hash_cost == (
        "minimum"
    )
