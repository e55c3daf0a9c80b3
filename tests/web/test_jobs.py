"""The Jobs pages against a real database: roles, validation, escaping, delete refusal,
audit rows."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from tests.helpers.databases import count
from tests.helpers.job_pages import FORM
from tests.helpers.web import post

Conn = psycopg.Connection[Any]


def test_an_editor_creates_edits_and_deletes_a_job_and_each_change_is_audited(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    created = post(client, "/jobs", FORM)
    assert created.status_code == 303 and created.headers["location"] == "/jobs/nightly"
    job = conn.execute("SELECT * FROM job_definitions").fetchone()
    assert (job["handler"], job["args"], job["max_retries"]) == ("noop", {"a": 1}, 2)
    assert "nightly" in client.get("/jobs").text

    edited = post(client, "/jobs/nightly", {**FORM, "args": '{"a": 2}', "priority": "5"})
    assert edited.status_code == 303
    job = conn.execute("SELECT * FROM job_definitions").fetchone()
    assert (job["args"], job["priority"]) == ({"a": 2}, 5)

    assert post(client, "/jobs/nightly/delete", {}).status_code == 303
    assert count(conn, "job_definitions") == 0

    rows = conn.execute("SELECT actor, action, target_id, details FROM audit_log "
                        "WHERE target_type = 'job' ORDER BY id").fetchall()  # fmt: skip
    assert [(r["actor"], r["action"], r["target_id"]) for r in rows] == [
        ("editor", "job.create", "nightly"),
        ("editor", "job.update", "nightly"),
        ("editor", "job.delete", "nightly"),
    ]
    update = rows[1]["details"]
    assert update["before"]["args"] == {"a": 1} and update["after"]["args"] == {"a": 2}
    assert update["before"]["priority"] == 1 and update["after"]["priority"] == 5
    page = client.get("/audit?action=job.update").text
    assert "job.update" in page and "job.create" not in page.split("<tbody>")[1]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"args": "{not json"}, "args", "args are not valid JSON"),
        ({"args": "[1, 2]"}, "args", "args must be a JSON object"),
        ({"handler": "no_such_handler"}, "handler", "unknown handler"),
        ({"name": ""}, "name", "a job name cannot be empty"),
        ({"priority": "high"}, "priority", "priority must be a whole number"),
        ({"timeout_seconds": "0"}, "timeout_seconds", "the timeout must be between 1 and"),
        ({"handler": "shell"}, "handler", "only an admin may"),
    ],
)
def test_bad_input_gets_a_message_next_to_its_field_and_nothing_is_saved(
    as_role: Callable[[str], TestClient],
    conn: Conn,
    change: dict[str, str],
    field: str,
    message: str,
) -> None:
    client = as_role("editor")
    # a live worker registered, so unknown handlers are refused rather than warned about
    conn.execute("INSERT INTO workers (id, host, pid, concurrency, handlers) "
                 "VALUES ('w1', 'h', 1, 1, '[\"report\"]')")  # fmt: skip
    response = post(client, "/jobs", {**FORM, **change})
    assert response.status_code == 422
    error = re.search(rf'<p class="field-error" id="{field}-error">([^<]*)</p>', response.text)
    assert error and message in error[1]
    assert count(conn, "job_definitions") == 0


def test_a_duplicate_name_is_refused_next_to_the_name(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    post(client, "/jobs", FORM)
    again = post(client, "/jobs", {**FORM, "handler": "sleep"})
    assert again.status_code == 422 and 'id="name-error"' in again.text
    assert "already exists" in again.text
    assert conn.execute("SELECT handler FROM job_definitions").fetchone()["handler"] == "noop"


def test_the_handler_menu_offers_builtins_and_live_workers_handlers(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    conn.execute("INSERT INTO workers (id, host, pid, concurrency, handlers) "
                 "VALUES ('w1', 'h', 1, 1, '[\"send_report\"]'), "
                 "('w2', 'h', 2, 1, '[\"gone_handler\"]')")  # fmt: skip
    conn.execute("UPDATE workers SET stopped_at = now() WHERE id = 'w2'")
    page = as_role("editor").get("/jobs/new").text
    assert '<option value="send_report"' in page and '<option value="noop"' in page
    assert "gone_handler" not in page
    assert '<option value="shell"' not in page  # an admin's choice only


def test_a_viewer_sees_no_buttons_and_gets_403_on_every_change(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    conn.execute("INSERT INTO job_definitions (id, name, handler) "
                 "VALUES (gen_random_uuid(), 'nightly', 'noop')")  # fmt: skip
    client = as_role("viewer")
    index = client.get("/jobs").text
    show = client.get("/jobs/nightly").text
    for page in (index, show):
        assert "New job" not in page and '<form id="job-form"' not in page
        assert "Delete job" not in page
    assert client.get("/jobs/new").status_code == 403
    for path, data in [
        ("/jobs", FORM),
        ("/jobs/nightly", FORM),
        ("/jobs/nightly/delete", {}),
    ]:
        refused = post(client, path, data)
        assert refused.status_code == 403 and "needs the editor role" in refused.text
    assert count(conn, "job_definitions") == 1
    assert count(conn, "audit_log") == 1  # only the viewer's own account


def test_names_with_markup_are_shown_as_text(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    name = "<script>alert(1)</script>"
    assert post(client, "/jobs", {**FORM, "name": name}).status_code == 303
    shown = "/jobs/%3Cscript%3Ealert(1)%3C%2Fscript%3E"
    for page in (client.get("/jobs").text, client.get(shown).text, client.get("/audit").text):
        assert "<script>alert(1)" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_deleting_a_job_a_schedule_or_workflow_uses_is_refused_with_their_names(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    post(client, "/jobs", FORM)
    conn.execute("INSERT INTO schedules (id, name, job_id, cron, timezone, next_fire_time) "
                 "SELECT gen_random_uuid(), 'every-night', id, '0 2 * * *', 'UTC', now() "
                 "FROM job_definitions")  # fmt: skip
    refused = post(client, "/jobs/nightly/delete", {})
    assert refused.status_code == 409
    assert "schedule &#39;every-night&#39; runs it" in refused.text
    assert count(conn, "job_definitions") == 1 and count(conn, "schedules") == 1

    workflow = conn.execute("INSERT INTO workflows (id, name) VALUES (gen_random_uuid(), 'etl') "
                            "RETURNING id").fetchone()["id"]  # fmt: skip
    conn.execute("INSERT INTO workflow_steps (workflow_id, name, job_id) "
                 "SELECT %s, 'load', id FROM job_definitions", (workflow,))  # fmt: skip
    refused = post(client, "/jobs/nightly/delete", {"with_schedules": "yes"})
    assert refused.status_code == 409 and "a workflow still uses it (&#39;etl&#39;)" in refused.text
    assert count(conn, "job_definitions") == 1

    conn.execute("DELETE FROM workflows")
    assert post(client, "/jobs/nightly/delete", {"with_schedules": "yes"}).status_code == 303
    assert count(conn, "job_definitions") == 0 and count(conn, "schedules") == 0
    (audit,) = conn.execute("SELECT details FROM audit_log WHERE action = 'job.delete'").fetchall()
    assert audit["details"]["before"]["schedules"] == ["every-night"]
    # the schedule's own deletion is on record too, by the same person, before the job's
    deletions = conn.execute("SELECT action, target_id, actor FROM audit_log "
                             "WHERE action LIKE '%%.delete' ORDER BY id").fetchall()  # fmt: skip
    assert [(d["action"], d["target_id"]) for d in deletions] == [
        ("schedule.delete", "every-night"),
        ("job.delete", "nightly"),
    ]
    assert {d["actor"] for d in deletions} == {"editor"}


def test_a_worker_unseen_for_the_live_window_no_longer_vouches_for_its_handlers(
    conn: Conn,
) -> None:
    from app.catalog.job_definitions import handler_choices
    from app.handlers.worker_registry import LIVE_SECONDS as WORKER_LIVE_SECONDS
    from app.web.home import overview
    from tests.helpers.waits import db_now

    conn.execute("INSERT INTO workers (id, host, pid, concurrency, handlers) "
                 "VALUES ('w1', 'h', 1, 1, '[\"send_report\"]')")  # fmt: skip
    now = db_now(conn)
    assert "send_report" in handler_choices(conn, now)
    assert overview(conn, now)["live_workers"] == 1
    later = now + timedelta(seconds=max(WORKER_LIVE_SECONDS, 60) + 1)
    assert "send_report" not in handler_choices(conn, later)
    assert overview(conn, later)["live_workers"] == 0


def test_the_jobs_list_comes_in_pages_and_filters_by_name_or_handler(
    as_role: Callable[[str], TestClient], conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.catalog import job_definitions
    from app.catalog.job_definitions import JobSpec

    monkeypatch.setattr(job_definitions, "LIST_PAGE", 2)
    for name, handler in (("load", "noop"), ("clean", "echo"), ("bill", "noop"), ("audit", "noop")):
        job_definitions.create(conn, JobSpec(name=name, handler=handler), actor="test")
    client = as_role("viewer")

    def names(html: str) -> list[str]:
        return re.findall(r'<a href="/jobs/([^"/]+)">', html)

    first = client.get("/jobs").text
    assert names(first) == ["audit", "bill"] and "4 jobs, 2 on this page" in first
    following = re.search(r'<a href="([^"]+)" rel="next">', first)
    assert following is not None
    second = client.get(following[1].replace("&amp;", "&")).text
    assert names(second) == ["clean", "load"] and 'rel="next"' not in second
    assert "First page" in second
    only_noop = client.get("/jobs?q=noo").text
    assert names(only_noop) == ["audit", "bill"] and "3 jobs" in only_noop
    assert "No job matches" in client.get("/jobs?q=nothing-like-it").text
    assert names(client.get("/jobs?q=%25").text) == []  # a % is a character, not a wildcard


def test_a_renamed_job_shows_its_versions_under_its_new_name_and_a_new_one_starts_afresh(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    post(client, "/jobs", {**FORM, "name": "A"})
    post(client, "/jobs/A", {**FORM, "name": "A", "priority": "5"})
    renamed = post(client, "/jobs/A", {**FORM, "name": "B", "priority": "5"})
    assert renamed.status_code == 303
    post(client, "/jobs", {**FORM, "name": "A", "args": '{"fresh": true}'})

    b = client.get("/jobs/B/history").text
    assert "Version 3 (current)" in b and "<del>A</del>" in b and "<ins>B</ins>" in b
    a = client.get("/jobs/A/history").text
    assert "Version 1 (current)" in a and "Version 2" not in a
    first = conn.execute(
        "SELECT id FROM audit_log WHERE action = 'job.create' ORDER BY id"
    ).fetchone()["id"]
    back = post(client, "/jobs/B/rollback", {"version": str(first)})
    assert back.status_code == 303
    rows = conn.execute("SELECT name, priority, args FROM job_definitions ORDER BY name").fetchall()
    assert [(r["name"], r["priority"], r["args"]) for r in rows] == [
        ("A", 1, {"fresh": True}),
        ("B", 1, {"a": 1}),
    ]
    assert post(client, "/jobs/A/rollback", {"version": str(first)}).status_code == 422
