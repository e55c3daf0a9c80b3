"""A small HTTP client for the JSON API tests: real requests to a real `sundial web`."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.people import tokens, users
from tests.helpers.people import PASSWORD


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def error(self) -> dict[str, Any]:
        detail: dict[str, Any] = self.body["error"]
        return detail


def request(
    base: str,
    method: str,
    path: str,
    token: str | None = None,
    body: Any = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    sent = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(base + path, data=data, method=method, headers=sent)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return _answer(response.status, response.read(), dict(response.headers))
    except urllib.error.HTTPError as exc:
        return _answer(exc.code, exc.read(), dict(exc.headers))


def _answer(status: int, payload: bytes, headers: dict[str, str]) -> Answer:
    kind = headers.get("content-type", headers.get("Content-Type", ""))
    body: Any = json.loads(payload) if payload and "json" in kind else payload.decode()
    return Answer(status, body, {k.lower(): v for k, v in headers.items()})


def make_token(
    db_url: str,
    role: str = "operator",
    scope: str = "write",
    *,
    username: str | None = None,
    lifetime: timedelta | None = None,
    now: Any = None,
) -> str:
    """A token for a (new) user of `role`; `now` backdates its creation."""
    name = username or f"{role}-{scope}"
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        if users.find_user(conn, name) is None:
            users.create_user(conn, name, PASSWORD, role, actor="test")
        made = tokens.create(
            conn, name, scope, name="test", actor="test", lifetime=lifetime, now=now
        )
    return made.secret


def api_as(db_url: str, role: str) -> Any:
    """An in-process client of the whole app (a Starlette TestClient) holding a write token
    of a new user of `role`."""
    from starlette.testclient import TestClient

    from app.core.config import Settings
    from app.web import create_app

    settings = Settings.from_env({"DATABASE_URL": db_url, "SECRET_KEY": "test-secret-key"})
    client = TestClient(create_app(settings, db_url))
    client.headers["authorization"] = f"Bearer {make_token(db_url, role, 'write')}"
    return client


def assert_documented(base: str, token: str, schema: str, body: Any) -> None:
    """`body` matches the OpenAPI document's schema `schema`, with a `date-time` that is
    RFC 3339's: an offset is required (a wall-clock time without one is not a date-time)."""
    import jsonschema

    document = request(base, "GET", "/api/v1/openapi.json", token).body
    root = {**document["components"]["schemas"][schema], "components": document["components"]}
    formats = jsonschema.FormatChecker()

    @formats.checks("date-time", raises=ValueError)
    def rfc3339(value: object) -> bool:
        text = str(value)
        return datetime.fromisoformat(text.replace("Z", "+00:00")).tzinfo is not None

    jsonschema.Draft202012Validator(root, format_checker=formats).validate(body)
