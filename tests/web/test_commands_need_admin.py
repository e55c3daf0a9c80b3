"""Work that runs commands (the `shell` handler) needs an admin at every door of the API
and the pages: an operator's or editor's write token gets 403 and nothing is stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from app.handlers.gate import set_shell_enabled
from app.runs import submission
from app.runs.run_inserts import NewRun
from tests.helpers.api_client import make_token, request
from tests.helpers.people import csrf_of
from tests.helpers.processes import query

SHELL = {"handler": "shell", "args": {"command": "true"}}


def _count(db_url: str, table: str) -> int:
    return int(query(db_url, f"SELECT count(*) AS n FROM {table}")[0]["n"])


@pytest.mark.parametrize("role", ["operator", "editor"])
def test_a_token_below_admin_cannot_start_a_command_by_any_way(
    live_server: str, db_url: str, conn: psycopg.Connection[Any], role: str
) -> None:
    set_shell_enabled(conn, True, actor="test")
    failed = submission.submit(conn, NewRun("shell", {"command": "false"})).id
    conn.execute(
        "UPDATE job_runs SET status = 'failed', finished_at = now() WHERE id = %s", (failed,)
    )
    runs_before = _count(db_url, "job_runs")
    token = make_token(db_url, role, "write")
    attempts = [
        ("POST", "/api/v1/runs", SHELL),
        ("POST", "/api/v1/runs/batch", {"runs": [{"handler": "noop"}, SHELL]}),
        (
            "POST",
            "/api/v1/dags",
            {"nodes": {"a": {"handler": "noop"}, "b": {**SHELL, "after": ["a"]}}},
        ),
        ("POST", f"/api/v1/runs/{failed}/retry", None),
    ]
    for method, path, body in attempts:
        answer = request(live_server, method, path, token, body)
        assert answer.status == 403, (path, answer.status, answer.body)
        assert "only an admin" in answer.error["message"], path
    assert _count(db_url, "job_runs") == runs_before
    assert (
        query(db_url, "SELECT status FROM job_runs WHERE id = %s", failed)[0]["status"] == "failed"
    )


def test_an_admin_token_may_start_a_command(
    live_server: str, db_url: str, conn: psycopg.Connection[Any]
) -> None:
    set_shell_enabled(conn, True, actor="test")
    answer = request(
        live_server, "POST", "/api/v1/runs", make_token(db_url, "admin", "write"), SHELL
    )
    assert answer.status == 201, answer.body


def test_a_page_button_below_admin_shows_why_in_place(
    as_role: Callable[[str], TestClient], conn: psycopg.Connection[Any], db_url: str
) -> None:
    set_shell_enabled(conn, True, actor="test")
    failed = submission.submit(conn, NewRun("shell", {"command": "false"})).id
    conn.execute(
        "UPDATE job_runs SET status = 'failed', finished_at = now() WHERE id = %s", (failed,)
    )
    client = as_role("operator")
    answer = client.post(
        f"/runs/{failed}/retry",
        headers={"HX-Request": "true", "X-CSRF-Token": csrf_of(client, "/runs")},
    )
    assert answer.status_code == 403 and "Only an admin" in answer.text
    assert answer.headers["HX-Retarget"] == "body"  # shown in place of the page
    assert (
        query(db_url, "SELECT status FROM job_runs WHERE id = %s", failed)[0]["status"] == "failed"
    )
