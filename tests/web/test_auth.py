"""Sign-in, sessions, CSRF, security headers, rate limiting, roles on every route."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from app.core.config import DEV_SECRET_KEY, ConfigError, Settings
from app.people.roles import Role
from app.people.users import LOGIN_MAX_FAILURES
from app.web import create_app
from app.web.access import ROLE_ATTRIBUTE
from app.web.app import check_secret_key
from tests.helpers.people import PASSWORD, csrf_of, make_user


def test_pages_send_a_person_who_is_not_signed_in_to_the_sign_in_page(client: TestClient) -> None:
    response = client.get("/jobs", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Fjobs"


def test_sign_in_sets_an_http_only_lax_cookie_holding_only_a_random_id(
    client: TestClient, db_url: str, conn: psycopg.Connection[Any]
) -> None:
    make_user(db_url, "alice", "viewer")
    response = client.post(
        "/login",
        data={"username": "alice", "password": PASSWORD, "csrf_token": csrf_of(client)},
        follow_redirects=False,
    )
    cookie = response.headers["set-cookie"]
    assert "sundial_session=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
    token = client.cookies["sundial_session"]
    (row,) = conn.execute("SELECT id FROM web_sessions").fetchall()
    assert row["id"] != token  # the database keeps only its HMAC
    assert client.get("/").status_code == 200


def test_a_wrong_password_is_refused_and_repeated_failures_are_rate_limited(
    client: TestClient, db_url: str
) -> None:
    make_user(db_url, "alice", "viewer")
    token = csrf_of(client)
    for _ in range(LOGIN_MAX_FAILURES):
        wrong = client.post(
            "/login", data={"username": "alice", "password": "nope", "csrf_token": token}
        )
        assert wrong.status_code == 401 and "do not match" in wrong.text
    limited = client.post(
        "/login", data={"username": "alice", "password": PASSWORD, "csrf_token": token}
    )
    assert limited.status_code == 429 and "too many failed sign-ins" in limited.text


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    as_role: Callable[[str], TestClient], conn: psycopg.Connection[Any]
) -> None:
    client = as_role("editor")
    form = {"name": "x", "handler": "noop", "args": "{}", "execution_model": "async",
            "priority": "1", "timeout_seconds": "60", "max_retries": "0"}  # fmt: skip
    assert client.post("/jobs", data=form).status_code == 403
    assert client.post("/jobs", data={**form, "csrf_token": "0" * 64}).status_code == 403
    assert conn.execute("SELECT count(*) AS n FROM job_definitions").fetchone()["n"] == 0
    # the htmx way: the token in the header that hx-headers adds
    token = csrf_of(client, "/jobs/new")
    created = client.post(
        "/jobs", data=form, headers={"X-CSRF-Token": token}, follow_redirects=False
    )
    assert created.status_code == 303


def test_pages_carry_the_security_headers(client: TestClient) -> None:
    headers = client.get("/login").headers
    csp = headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"


def test_sign_out_ends_the_session(as_role: Callable[[str], TestClient]) -> None:
    client = as_role("viewer")
    token = csrf_of(client, "/")
    assert (
        client.post("/logout", data={"csrf_token": token}, follow_redirects=False).status_code
        == 303
    )
    assert client.get("/", follow_redirects=False).status_code == 303


def test_a_one_time_sign_in_link_works_once(
    client: TestClient, db_url: str, conn: psycopg.Connection[Any]
) -> None:
    from app.cli.users import dev_sign_in_link

    link = dev_sign_in_link(db_url, "test-secret-key", 8000)
    path = link.removeprefix("http://localhost:8000")
    assert client.get(path, follow_redirects=False).status_code == 303
    assert client.get("/").status_code == 200
    client.cookies.clear()
    assert client.get(path, follow_redirects=False).status_code == 400


def test_every_route_declares_the_role_it_needs(db_url: str) -> None:
    app = create_app(Settings.from_env({"SECRET_KEY": "k"}), db_url)
    undeclared = []
    for route in app.routes:
        children = route.routes if isinstance(route, Mount) and route.name != "static" else [route]
        for child in children:
            if isinstance(child, Route) and not hasattr(child.endpoint, ROLE_ATTRIBUTE):
                undeclared.append(child.path)
    assert undeclared == []


def test_web_refuses_the_development_key_unless_bound_to_localhost() -> None:
    dev = Settings.from_env({})
    assert dev.secret_key == DEV_SECRET_KEY
    check_secret_key(dev, "127.0.0.1")
    with pytest.raises(ConfigError, match="SECRET_KEY is the development key"):
        check_secret_key(dev, "0.0.0.0")
    check_secret_key(Settings.from_env({"SECRET_KEY": "long random"}), "0.0.0.0")


def test_roles_are_ordered() -> None:
    assert [r.value for r in Role] == ["viewer", "operator", "editor", "admin"]
    assert Role.ADMIN.allows(Role.EDITOR) and not Role.OPERATOR.allows(Role.EDITOR)


def test_sundial_web_will_not_start_on_all_addresses_with_the_development_key(
    db_url: str,
) -> None:
    from tests.helpers.commands import run_sundial

    refused = run_sundial(db_url, "web", "--host", "0.0.0.0", "--port", "1", SECRET_KEY="")
    assert refused.returncode == 2
    assert "sundial web: error: SECRET_KEY is the development key" in refused.stderr


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "/\\evil.example"])
def test_sign_in_only_returns_to_a_path_on_this_site(
    client: TestClient, db_url: str, target: str
) -> None:
    make_user(db_url, "alice", "viewer")
    response = client.post(
        "/login",
        data={"username": "alice", "password": PASSWORD, "next": target,
              "csrf_token": csrf_of(client)},
        follow_redirects=False,
    )  # fmt: skip
    assert response.headers["location"] == "/"


def test_failures_older_than_the_window_no_longer_count_and_are_forgotten(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    from app.people.users import LOGIN_WINDOW_SECONDS, sign_in

    make_user(db_url, "alice", "viewer")
    conn.execute(
        "INSERT INTO login_failures (username, address, at) "
        "SELECT 'alice', 'a', now() - make_interval(secs => %s) FROM generate_series(1, %s)",
        (LOGIN_WINDOW_SECONDS + 60, LOGIN_MAX_FAILURES),
    )
    assert sign_in(conn, "alice", "wrong", address="a") is None  # not locked out
    assert conn.execute("SELECT count(*) AS n FROM login_failures").fetchone()["n"] == 1
    assert sign_in(conn, "alice", PASSWORD, address="a") is not None


def test_sessions_and_sign_in_links_end_when_their_lifetime_has_passed(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    from app.people import users
    from tests.helpers.waits import db_now

    make_user(db_url, "alice", "viewer")
    alice = users.find_user(conn, "alice")
    assert alice is not None
    now = db_now(conn)
    session = users.start_session(conn, alice, "k", now=now)
    link = users.create_sign_in_link(conn, alice, "k", now=now)
    last_moment = now + timedelta(seconds=users.SESSION_LIFETIME_SECONDS - 1)
    assert users.session_user(conn, session, "k", now=last_moment) == alice
    after = now + timedelta(seconds=users.SESSION_LIFETIME_SECONDS)
    assert users.session_user(conn, session, "k", now=after) is None
    link_after = now + timedelta(seconds=users.SIGN_IN_LINK_LIFETIME_SECONDS)
    assert users.use_sign_in_link(conn, link, "k", now=link_after) is None
    # the expired link was not used up: an earlier moment still finds it, once
    assert users.use_sign_in_link(conn, link, "k", now=now) == alice
    assert users.use_sign_in_link(conn, link, "k", now=now) is None
