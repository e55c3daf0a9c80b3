"""Posting forms to the dashboard as a browser does, with the CSRF token."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from tests.helpers.people import csrf_of


def post(client: TestClient, path: str, data: dict[str, Any], **headers: str) -> Any:
    token = csrf_of(client, "/")
    return client.post(
        path, data={**data, "csrf_token": token}, headers=headers, follow_redirects=False
    )
