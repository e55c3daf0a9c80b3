"""What the JSON API refuses before any handler runs: bodies that are not JSON (415), JSON
that nests too deep or holds NaN (400), a wrong method (405 with every allowed method in
Allow), and no redirect built from the Host header."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from app.core import limits
from app.core.config import Settings
from app.web import create_app
from tests.helpers.api_client import make_token
from tests.helpers.processes import query


@pytest.fixture
def api(db_url: str) -> Iterator[TestClient]:
    settings = Settings.from_env({"DATABASE_URL": db_url, "SECRET_KEY": "test-secret-key"})
    with TestClient(create_app(settings, db_url)) as client:
        client.headers["authorization"] = f"Bearer {make_token(db_url, 'admin', 'write')}"
        yield client


def runs_count(db_url: str) -> int:
    return int(query(db_url, "SELECT count(*) AS n FROM job_runs")[0]["n"])


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", b'{"handler": "noop"}'),
        ("application/x-www-form-urlencoded", b"handler=noop"),
        ("", b'{"handler": "noop"}'),
        ("application/xml", b"<run><handler>noop</handler></run>"),
    ],
)
def test_a_body_that_is_not_json_is_415(
    api: TestClient, db_url: str, content_type: str, body: bytes
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    answer = api.post("/api/v1/runs", content=body, headers=headers)
    assert answer.status_code == 415, answer.text
    assert "application/json" in answer.json()["error"]["message"]
    assert answer.json()["error"]["field"] == "body"
    assert runs_count(db_url) == 0


@pytest.mark.parametrize(
    "body",
    [
        b'{"handler": "noop", "args": ' + b"[" * 40 + b"]" * 40 + b"}",
        b'{"handler": "noop", "args": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"handler": "noop", "args": {"x": NaN}}',
        b'{"handler": "noop", "args": {"x": Infinity}}',
        b'{"handler": "noop"',
    ],
)
def test_json_nested_too_deep_or_not_json_numbers_is_400(
    api: TestClient, db_url: str, body: bytes
) -> None:
    answer = api.post("/api/v1/runs", content=body, headers={"content-type": "application/json"})
    assert answer.status_code in (400, 413), answer.text
    assert answer.json()["error"]["message"]
    assert runs_count(db_url) == 0


def test_json_with_a_charset_is_json(api: TestClient) -> None:
    answer = api.post(
        "/api/v1/runs",
        content=b'{"handler": "noop"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert answer.status_code == 201, answer.text


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_a_wrong_method_is_405_with_every_allowed_method(api: TestClient, method: str) -> None:
    answer = api.request(method, "/api/v1/runs")
    assert answer.status_code == 405
    assert {"GET", "POST"} <= {m.strip() for m in answer.headers["allow"].split(",")}
    assert answer.json()["error"]["message"]


def test_no_redirect_follows_the_host_header(api: TestClient) -> None:
    for path in ("/api/v1/runs/", "/jobs/", "/healthz/"):
        answer = api.get(path, headers={"host": "evil.example"}, follow_redirects=False)
        assert "evil.example" not in answer.headers.get("location", ""), path


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/runs", {"handler": "noop", "priority": True}, "priority"),
        ("/api/v1/runs", {"handler": "noop", "priority": "5"}, "priority"),
        ("/api/v1/runs", {"handler": "noop", "max_retries": 2.5}, "max_retries"),
        ("/api/v1/runs", {"handler": "noop", "timeout_seconds": False}, "timeout_seconds"),
        ("/api/v1/runs", {"handler": 5}, "handler"),
        ("/api/v1/runs", {"handler": "noop", "args": "{}"}, "args"),
        ("/api/v1/runs", {"handler": "noop", "execution_model": "fast"}, "execution_model"),
        ("/api/v1/jobs", {"name": "j", "handler": "noop", "max_crashes": "3"}, "max_crashes"),
        ("/api/v1/jobs", {"name": "j", "handler": "noop", "max_retries": False}, "max_retries"),
    ],
)
def test_json_types_are_strict_and_unknown_values_refused(
    api: TestClient, db_url: str, path: str, body: dict[str, object], field: str
) -> None:
    answer = api.post(path, json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field
    assert runs_count(db_url) == 0
    assert query(db_url, "SELECT count(*) AS n FROM job_definitions")[0]["n"] == 0


def test_allow_lists_what_the_document_says_a_path_serves(api: TestClient) -> None:
    answer = api.get("/api/v1/runs/batch")
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    document = api.get("/api/v1/openapi.json").json()
    assert set(document["paths"]["/api/v1/runs/batch"]) == {"post"}
    assert "/api/v1/runs/{run_id}" in document["paths"]


@pytest.mark.parametrize("name", ["two\nlines", "tab\there", "bell\x07", "rtl\u202eevil", "  "])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/jobs", {"handler": "noop"}),
        ("/api/v1/schedules", {"handler": "noop", "every_seconds": 60}),
        ("/api/v1/workflows", {"steps": {"a": {"job": "x"}}, "edges": []}),
    ],
)
def test_a_name_is_read_by_one_rule_at_every_door(
    api: TestClient, db_url: str, path: str, body: dict[str, object], name: str
) -> None:
    answer = api.post(path, json={**body, "name": name})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "name"
    for table in ("job_definitions", "schedules", "workflows"):
        assert query(db_url, f"SELECT count(*) AS n FROM {table}")[0]["n"] == 0
    # the API's document says the same
    pattern = api.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert any(
        prop.get("pattern") == limits.NAME_PATTERN
        for schema in pattern.values()
        for prop in schema.get("properties", {}).values()
    )


@pytest.mark.parametrize("name", ["two\nlines", "rtl\u202eevil"])
def test_the_cli_and_the_pages_refuse_the_same_names(db_url: str, name: str) -> None:
    from tests.helpers.commands import run_sundial

    result = run_sundial(db_url, "job", "add", name, "--handler", "noop")
    assert result.returncode == 2 and "cannot contain control characters" in result.stderr
    assert query(db_url, "SELECT count(*) AS n FROM job_definitions")[0]["n"] == 0


def test_a_number_without_a_fraction_is_a_whole_number_as_json_schema_says(
    api: TestClient,
) -> None:
    answer = api.post("/api/v1/runs", json={"handler": "noop", "max_retries": 2.0})
    assert answer.status_code == 201, answer.text
    assert answer.json()["run"]["max_retries"] == 2


def test_a_null_body_is_not_an_empty_one(api: TestClient) -> None:
    api.post("/api/v1/schedules", json={"name": "s", "every_seconds": 60, "handler": "noop"})
    null = api.post("/api/v1/schedules/s/pause", content=b"null",
                    headers={"content-type": "application/json"})  # fmt: skip
    assert null.status_code == 422 and null.json()["error"]["field"] == "body"
    empty = api.post("/api/v1/schedules/s/pause")  # its fields are all optional
    assert empty.status_code == 200, empty.text


def test_names_of_nothing_are_404_and_names_taken_are_409(api: TestClient) -> None:
    every = {"every_seconds": 60}
    assert api.post("/api/v1/runs", json={"job": "nope"}).status_code == 404
    assert (
        api.post("/api/v1/schedules", json={"name": "a", "job": "nope", **every}).status_code == 404
    )
    assert (
        api.post("/api/v1/schedules", json={"name": "a", "workflow": "nope", **every}).status_code
        == 404
    )
    assert (
        api.post("/api/v1/schedules", json={"name": "a", "handler": "noop", **every}).status_code
        == 201
    )
    again = api.post("/api/v1/schedules", json={"name": "a", "handler": "noop", **every})
    assert again.status_code == 409 and "already exists" in again.json()["error"]["message"]


def test_a_change_cannot_clear_what_a_schedule_always_has(api: TestClient) -> None:
    api.post("/api/v1/schedules", json={"name": "s", "every_seconds": 60, "handler": "noop"})
    for field in ("overlap", "exact_minute", "dst_repeated", "timezone", "catchup"):
        answer = api.patch("/api/v1/schedules/s", json={field: None})
        assert answer.status_code == 422, (field, answer.text)


def test_the_reference_page_names_the_zone_list_without_printing_it(api: TestClient) -> None:
    page = api.get("/api/v1/docs").text
    assert "one of 5" in page or "one of 6" in page  # some 600 names
    assert "names, listed in openapi.json" in page and "Africa/Abidjan" not in page
    zones = api.get("/api/v1/openapi.json").json()["components"]["schemas"]["ScheduleIn"]
    assert "Europe/Berlin" in str(zones)


@pytest.mark.parametrize("body", [b"\r", b" \n\t "])
def test_a_body_of_whitespace_alone_is_not_json_and_starts_nothing(
    api: TestClient, db_url: str, body: bytes
) -> None:
    # Only an empty body counts as no body: whitespace is a body, and not JSON.
    headers = {"content-type": "application/json"}
    answer = api.post("/api/v1/runs", content=body, headers=headers)
    assert answer.status_code == 400, answer.text
    assert "not valid JSON" in answer.json()["error"]["message"]
    assert runs_count(db_url) == 0


def test_every_operation_with_a_path_value_documents_404(api: TestClient) -> None:
    # A value holding a slash (a queue named `a/b`) reaches no operation: 404 from the router.
    spec = api.get("/api/v1/openapi.json").json()
    missing = [
        f"{method.upper()} {path}"
        for path, methods in spec["paths"].items()
        if "{" in path
        for method, op in methods.items()
        if "404" not in op["responses"]
    ]
    assert missing == []
