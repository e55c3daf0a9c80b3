"""The services a job calls, on the job form and the job page, against a real database: the
box takes one a line or comma-separated, a refusal shows beside it, an edit keeps them, and
each new name gets a closed breaker (the catalogue's rule, the same as the CLI's and API's)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from app.runs import breakers
from tests.helpers.job_pages import FORM
from tests.helpers.web import post

Conn = psycopg.Connection[Any]
BOX = "Services it calls (one per line or comma-separated)"


def _dependencies(conn: Conn) -> list[str]:
    row = conn.execute("SELECT dependencies FROM job_definitions").fetchone()
    assert row is not None
    return list(row["dependencies"])


def test_an_editor_names_the_services_a_job_calls_and_an_edit_keeps_them(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    assert BOX in client.get("/jobs/new").text
    created = post(client, "/jobs", {**FORM, "dependencies": "payments-api, ledger\n\nmail "})
    assert created.status_code == 303, created.text
    assert _dependencies(conn) == ["payments-api", "ledger", "mail"]
    assert [(b.name, b.state.value) for b in breakers.overview(conn)] == [
        ("ledger", "closed"), ("mail", "closed"), ("payments-api", "closed"),
    ]  # fmt: skip

    page = client.get("/jobs/nightly").text
    assert re.search(r'<textarea id="dependencies"[^>]*>payments-api\nledger\nmail</textarea>',
                     page), page  # fmt: skip
    assert 'href="/queues#service-payments-api">payments-api</a>' in page

    assert post(client, "/jobs/nightly", {**FORM, "dependencies": "payments-api\nledger\nmail",
                                           "priority": "4"}).status_code == 303  # fmt: skip
    assert _dependencies(conn) == ["payments-api", "ledger", "mail"]
    assert post(client, "/jobs/nightly", {**FORM, "dependencies": ""}).status_code == 303
    assert _dependencies(conn) == []
    assert "It names no service its runs call." in client.get("/jobs/nightly").text


def test_a_refused_service_name_is_shown_beside_the_box(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    too_many = ", ".join(f"svc-{n}" for n in range(21))
    for text, message in [
        (too_many, "a job may name at most 20 dependencies"),
        ("x" * 201, "a dependency&#39;s name"),
    ]:
        refused = post(client, "/jobs", {**FORM, "dependencies": text})
        assert refused.status_code == 422
        assert re.search(r'<p class="field-error" id="dependencies-error">[^<]*' + message,
                         refused.text), refused.text  # fmt: skip
        assert 'aria-describedby="dependencies-help dependencies-error"' in refused.text
        assert 'aria-invalid="true"' in refused.text
        assert text.split(",")[0] in refused.text  # what was typed stays in the box
    assert conn.execute("SELECT count(*) AS n FROM job_definitions").fetchone() == {"n": 0}


def test_a_viewer_sees_the_services_a_job_calls(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    editor = as_role("editor")
    assert post(editor, "/jobs", {**FORM, "dependencies": "payments-api"}).status_code == 303
    viewer = as_role("viewer")
    page = viewer.get("/jobs/nightly").text
    assert "Its runs call" in page and ">payments-api</a>" in page
    assert 'id="dependencies"' not in page  # no form for a viewer
