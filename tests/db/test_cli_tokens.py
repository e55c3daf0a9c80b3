"""`sundial token create|list|revoke`: the secret printed once, only its hash kept,
expiry, revocation and the audit log."""

from __future__ import annotations

from app.people import tokens
from tests.helpers.commands import run_sundial
from tests.helpers.people import make_user
from tests.helpers.processes import query


def test_token_create_list_revoke(db_url: str) -> None:
    make_user(db_url, "deploy-bot", "operator")
    made = run_sundial(db_url, "token", "create", "--user", "deploy-bot", "--scope", "write",
                       "--expires", "30d", "--name", "ci")  # fmt: skip
    assert made.returncode == 0, made.stderr
    secret = made.stdout.splitlines()[0]
    assert secret.startswith(tokens.TOKEN_PREFIX)
    (row,) = query(db_url, "SELECT id, scope, token_hash, expires_at - created_at AS life "
                   "FROM api_tokens")  # fmt: skip
    assert (row["scope"], row["token_hash"]) == ("write", tokens.hash_secret(secret))
    assert row["life"].days == 30
    listed = run_sundial(db_url, "token", "list")
    assert "deploy-bot" in listed.stdout and "active" in listed.stdout
    assert secret not in listed.stdout and secret[:14] in listed.stdout
    assert run_sundial(db_url, "token", "revoke", str(row["id"])).returncode == 0
    again = run_sundial(db_url, "token", "revoke", str(row["id"]))
    assert again.returncode == 2 and "already revoked" in again.stderr
    actions = [r["action"] for r in query(db_url, "SELECT action FROM audit_log ORDER BY id")]
    assert actions[-2:] == ["token.create", "token.revoke"]


def test_token_create_refuses_unknown_users_scopes_and_lifetimes(db_url: str) -> None:
    nobody = run_sundial(db_url, "token", "create", "--user", "ghost", "--scope", "read")
    assert nobody.returncode == 2 and "no user named 'ghost'" in nobody.stderr
    make_user(db_url, "reader", "viewer")
    forever = run_sundial(db_url, "token", "create", "--user", "reader", "--scope", "read",
                          "--expires", "soon")  # fmt: skip
    assert forever.returncode == 2 and "30d, 12h or 90m" in forever.stderr
    scope = run_sundial(db_url, "token", "create", "--user", "reader", "--scope", "admin")
    assert scope.returncode != 0
    assert query(db_url, "SELECT count(*) AS n FROM api_tokens")[0]["n"] == 0
