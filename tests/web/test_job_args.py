"""The job form for a handler that declares its arguments: one field per property, errors
next to the field with nothing saved, htmx swapping the fields when the handler changes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from tests.helpers.databases import count
from tests.helpers.handler_schemas import error_of, live_worker_declaring
from tests.helpers.job_pages import FORM
from tests.helpers.web import post

Conn = psycopg.Connection[Any]
REPORT = {**FORM, "handler": "report", "args_for": "report"}


def test_the_form_shows_a_labelled_field_per_declared_argument(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    live_worker_declaring(conn)
    client = as_role("editor")
    page = client.get("/jobs/args-fields", params={"handler": "report"}).text
    assert 'name="args.email"' in page and 'type="text"' in page and "(required)" in page
    assert re.search(r'name="args.retries" value="3"\s+type="number" step="1"', page)
    assert 'type="checkbox" id="arg-3" name="args.urgent"' in page
    assert '<option value="loud"' in page
    assert "<script>alert(1)</script>" not in page  # a description is text, not markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'name="args"' not in page  # no JSON editor for a handler that declares

    fragment = client.get(
        "/jobs/args-fields", params={"handler": "noop"}, headers={"HX-Request": "true"}
    ).text
    assert fragment.startswith('<div id="args-fields">') or 'id="args-fields"' in fragment
    assert "<html" not in fragment and 'name="args"' in fragment  # JSON editor as before


def test_fields_are_saved_as_typed_args(as_role: Callable[[str], TestClient], conn: Conn) -> None:
    live_worker_declaring(conn)
    client = as_role("editor")
    form = {**REPORT, "args.email": "ops@example.com", "args.retries": "5", "args.urgent": "on",
            "args.tone": "loud"}  # fmt: skip
    assert post(client, "/jobs", form).status_code == 303
    job = conn.execute("SELECT args FROM job_definitions").fetchone()
    assert job["args"] == {"email": "ops@example.com", "retries": 5, "urgent": True,
                           "tone": "loud"}  # fmt: skip
    page = client.get("/jobs/nightly").text
    assert 'value="ops@example.com"' in page and "checked" in page


def test_a_bad_argument_gets_its_message_next_to_the_field_and_nothing_is_saved(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    live_worker_declaring(conn)
    client = as_role("editor")
    missing = post(client, "/jobs", {**REPORT, "args.retries": "2"})
    assert missing.status_code == 422
    assert error_of(missing.text, "arg-1") == "email is required"
    assert 'name="args.retries" value="2"' in missing.text  # what was typed stays

    not_whole = post(client, "/jobs", {**REPORT, "args.email": "a", "args.retries": "three"})
    assert not_whole.status_code == 422
    assert error_of(not_whole.text, "arg-2") == "retries must be a whole number"
    assert 'value="three"' in not_whole.text

    # JSON from the API or an old form is checked by the same rule
    as_json = post(client, "/jobs", {**FORM, "handler": "report", "args": '{"tone": "quiet"}'})
    assert as_json.status_code == 422 and error_of(as_json.text, "arg-1") == "email is required"
    assert count(conn, "job_definitions") == 0
    assert count(conn, "audit_log WHERE target_type = 'job'") == 0


def test_without_javascript_a_changed_handler_shows_its_fields_after_submit(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    live_worker_declaring(conn)
    client = as_role("editor")
    switched = post(client, "/jobs", {**FORM, "handler": "report", "args": "{}"})
    assert switched.status_code == 422 and 'name="args.email"' in switched.text
    assert error_of(switched.text, "arg-1") == "email is required"
    back = post(client, "/jobs", {**REPORT, "handler": "noop", "args.email": "a"})
    assert back.status_code == 422  # fields of another handler: shown as JSON to check first
    assert "The handler changed" in (error_of(back.text, "args") or "")
    shown = re.search(r'<textarea id="args" name="args"[^>]*>([^<]*)</textarea>', back.text)
    assert shown and json.loads(shown[1].replace("&#34;", '"')) == {"email": "a", "urgent": False}
    assert count(conn, "job_definitions") == 0
