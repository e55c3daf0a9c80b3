"""The workflow editor's form (rows of steps) and posting it as a browser does."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from tests.helpers.people import csrf_of


def form(
    name: str, steps: list[tuple[str, str, list[int]]], op: str = "save", **extra: str
) -> list[tuple[str, str]]:
    """The editor's fields: (step name, job, positions it runs after) per row."""
    fields = [("name", name), ("description", extra.get("description", "")), ("op", op)]
    for i, (step, job, after) in enumerate(steps):
        fields += [("step_name", step), ("step_job", job), ("step_args", extra.get(f"args{i}", ""))]
        fields += [(f"after_{i}", str(j)) for j in after]
    return fields


def post(client: TestClient, path: str, data: list[tuple[str, str]], **headers: str) -> Any:
    token = csrf_of(client, "/")
    return client.post(
        path,
        content=_encode([*data, ("csrf_token", token)]),
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
        follow_redirects=False,
    )


def _encode(fields: list[tuple[str, str]]) -> str:
    from urllib.parse import urlencode

    return urlencode(fields)
