"""Behind a proxy and over TLS: which client address counts, Secure cookies, HSTS, caching,
allowed hosts, and the sign-in limits per address and per account."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from starlette.testclient import TestClient

from app.core.config import ConfigError, Settings
from app.people.users import LOGIN_MAX_FAILURES_PER_ACCOUNT, LOGIN_MAX_FAILURES_PER_ADDRESS
from app.web import create_app
from tests.helpers.people import PASSWORD, csrf_of, make_user


@contextmanager
def client_with(
    db_url: str, base_url: str = "http://testserver", **env: str
) -> Iterator[TestClient]:
    settings = Settings.from_env({"DATABASE_URL": db_url, "SECRET_KEY": "test-secret-key", **env})
    with TestClient(create_app(settings, db_url), base_url=base_url) as client:
        yield client


def sign_in_response(client: TestClient, name: str, password: str, **headers: str):  # type: ignore[no-untyped-def]
    return client.post(
        "/login",
        data={"username": name, "password": password, "csrf_token": csrf_of(client)},
        headers=headers,
        follow_redirects=False,
    )


def test_forwarded_headers_are_ignored_without_the_trusted_proxies_setting(db_url: str) -> None:
    make_user(db_url, "alice", "viewer")
    with client_with(db_url) as client:
        response = sign_in_response(
            client,
            "alice",
            PASSWORD,
            **{"x-forwarded-proto": "https", "x-forwarded-for": "1.2.3.4"},
        )
        assert response.status_code == 303
        assert "Secure" not in response.headers["set-cookie"]
        assert "strict-transport-security" not in response.headers


def test_behind_a_trusted_proxy_the_cookie_is_secure_and_hsts_is_sent(db_url: str) -> None:
    make_user(db_url, "alice", "viewer")
    with client_with(db_url, SUNDIAL_TRUSTED_PROXIES="*") as client:
        response = sign_in_response(client, "alice", PASSWORD, **{"x-forwarded-proto": "https"})
        assert response.status_code == 303
        assert "Secure" in response.headers["set-cookie"]
        assert response.headers["strict-transport-security"].startswith("max-age=")


def test_behind_a_trusted_proxy_lockout_counts_the_real_client(db_url: str) -> None:
    """The router's address is the same for everyone: one attacker must not lock out
    another address by failing from behind it."""
    make_user(db_url, "alice", "viewer")
    with client_with(db_url, SUNDIAL_TRUSTED_PROXIES="*") as client:
        for _ in range(5):
            wrong = sign_in_response(client, "alice", "nope", **{"x-forwarded-for": "6.6.6.6"})
            assert wrong.status_code == 401
        assert (
            sign_in_response(client, "alice", "nope", **{"x-forwarded-for": "6.6.6.6"}).status_code
            == 429
        )
        honest = sign_in_response(client, "alice", PASSWORD, **{"x-forwarded-for": "7.7.7.7"})
        assert honest.status_code == 303


def test_one_address_trying_many_names_is_stopped(db_url: str) -> None:
    make_user(db_url, "alice", "viewer")
    with client_with(db_url) as client:
        for n in range(LOGIN_MAX_FAILURES_PER_ADDRESS):
            assert sign_in_response(client, f"user{n}", "Spring2026!").status_code == 401
        refused = sign_in_response(client, "alice", PASSWORD)
        assert refused.status_code == 429 and "from your address" in refused.text


def test_one_name_tried_from_many_addresses_is_stopped(db_url: str) -> None:
    make_user(db_url, "alice", "viewer")
    with client_with(db_url, SUNDIAL_TRUSTED_PROXIES="*") as client:
        for n in range(LOGIN_MAX_FAILURES_PER_ACCOUNT):
            address = f"10.0.{n // 250}.{n % 250 + 1}"
            assert (
                sign_in_response(client, "alice", "x", **{"x-forwarded-for": address}).status_code
                == 401
            )
        refused = sign_in_response(client, "alice", PASSWORD, **{"x-forwarded-for": "8.8.8.8"})
        assert refused.status_code == 429 and "many addresses" in refused.text


def test_signed_in_pages_are_not_stored_and_every_page_sets_a_permissions_policy(
    db_url: str,
) -> None:
    make_user(db_url, "alice", "viewer")
    with client_with(db_url) as client:
        assert "no-store" not in client.get("/login").headers.get("cache-control", "")
        assert "camera=()" in client.get("/login").headers["permissions-policy"]
        assert sign_in_response(client, "alice", PASSWORD).status_code == 303
        page = client.get("/jobs")
        assert page.status_code == 200 and page.headers["cache-control"] == "no-store"


def test_hsts_over_tls_directly(db_url: str) -> None:
    with client_with(db_url, base_url="https://testserver") as client:
        assert "max-age" in client.get("/login").headers["strict-transport-security"]


def test_allowed_hosts_refuse_other_host_names(db_url: str) -> None:
    with client_with(db_url, SUNDIAL_ALLOWED_HOSTS="sundial.example.com") as client:
        assert client.get("/login", headers={"host": "evil.example"}).status_code == 400
        assert client.get("/login", headers={"host": "sundial.example.com"}).status_code == 200


def test_a_bad_trusted_proxies_value_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="SUNDIAL_TRUSTED_PROXIES"):
        Settings.from_env({"SUNDIAL_TRUSTED_PROXIES": "the router"})


def test_the_favicon_is_served_and_linked(db_url: str) -> None:
    with client_with(db_url) as client:
        icon = client.get("/favicon.ico")
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert "<svg" in icon.text
        assert 'rel="icon"' in client.get("/login").text
