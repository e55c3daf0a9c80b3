"""The Workflows pages against a real database: the list editor (add, remove, save),
cycles refused with the edge named, errors next to their fields with nothing written,
roles, CSRF, escaping, delete refusal, run now, and an audit row for each change."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from app.catalog.job_definitions import JobSpec, create
from app.dags import workflow_shapes
from app.scheduling import schedule_spec, schedules
from tests.helpers.databases import count
from tests.helpers.workflow_pages import form, post

Conn = psycopg.Connection[Any]
EVIL = "<script>alert(1)</script>"


def jobs(conn: Conn, *names: str) -> None:
    for name in names:
        create(conn, JobSpec(name=name, handler="noop"), actor="test")


ETL = [("extract", "pull", []), ("transform", "shape", [0]), ("report", "mail", [1])]


def test_an_editor_creates_edits_and_deletes_a_workflow_and_each_change_is_audited(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    jobs(conn, "pull", "shape", "mail")
    client = as_role("editor")
    created = post(client, "/workflows", form("etl", ETL, description="nightly numbers",
                                              args2='{"to": "ops"}'))  # fmt: skip
    assert created.status_code == 303, created.text
    assert created.headers["location"] == "/workflows/etl"
    edges = conn.execute("SELECT upstream, downstream FROM workflow_edges ORDER BY 1").fetchall()
    assert [(e["upstream"], e["downstream"]) for e in edges] == [
        ("extract", "transform"), ("transform", "report"),
    ]  # fmt: skip
    step = conn.execute("SELECT args FROM workflow_steps WHERE name = 'report'").fetchone()
    assert step["args"] == {"to": "ops"}

    listing = client.get("/workflows").text
    assert "etl" in listing and "3 steps" in listing and "nightly numbers" in listing
    page = client.get("/workflows/etl").text
    assert 'role="img"' in page and ">transform</text>" in page
    assert "runs after extract" in page and "Run now" in page and "Delete workflow" in page

    edit_page = client.get("/workflows/etl/edit").text
    assert 'value="transform"' in edit_page and 'name="after_1" value="0" checked' in edit_page
    smaller = [("extract", "pull", []), ("report", "mail", [0])]
    assert post(client, "/workflows/etl", form("ignored", smaller)).status_code == 303
    assert count(conn, "workflow_steps") == 2

    assert post(client, "/workflows/etl/delete", []).status_code == 303
    assert count(conn, "workflows") == 0 and count(conn, "job_definitions") == 3

    rows = conn.execute("SELECT actor, action, target_id, details FROM audit_log "
                        "WHERE target_type = 'workflow' ORDER BY id").fetchall()  # fmt: skip
    assert [(r["actor"], r["action"], r["target_id"]) for r in rows] == [
        ("editor", "workflow.create", "etl"),
        ("editor", "workflow.update", "etl"),
        ("editor", "workflow.delete", "etl"),
    ]
    update = rows[1]["details"]
    assert set(update["before"]["steps"]) == {"extract", "transform", "report"}
    assert update["after"]["edges"] == [["extract", "report"]]
    assert rows[2]["details"]["before"]["steps"]["report"] == {"job": "mail", "args": {}}


def test_a_cycle_is_refused_naming_the_edge_and_nothing_is_saved(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    jobs(conn, "pull", "shape", "mail")
    client = as_role("editor")
    looped = [("load", "pull", [2]), ("transform", "shape", [0]), ("report", "mail", [1])]
    refused = post(client, "/workflows", form("etl", looped))
    assert refused.status_code == 422
    message = (
        "step `load` cannot run after `report`: `report` already runs after `load` "
        "(load → transform → report → load)"
    )
    assert f'<p class="field-error" id="steps-error" role="alert">{message}</p>' in refused.text
    assert "This would be refused" in refused.text  # the preview says so too
    assert 'value="transform"' in refused.text  # the form keeps what was typed
    assert count(conn, "workflows") == 0
    audited = conn.execute("SELECT count(*) AS n FROM audit_log WHERE target_type = 'workflow'")
    assert audited.fetchone()["n"] == 0

    preview = post(client, "/workflows/preview", form("etl", looped), **{"HX-Request": "true"})
    assert preview.status_code == 200 and message in preview.text
    fixed = post(client, "/workflows/preview", form("etl", ETL), **{"HX-Request": "true"})
    assert 'role="img"' in fixed.text and "<html" not in fixed.text


def test_bad_input_gets_messages_next_to_its_fields_and_writes_nothing(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    jobs(conn, "pull")
    client = as_role("editor")
    rows = [("a", "pull", []), ("", "pull", []), ("a", "", []), ("c", "pull", [])]
    refused = post(client, "/workflows", form("", rows, args3="[1, 2]"))
    assert refused.status_code == 422
    text = refused.text
    assert 'id="name-error">Give the workflow a name.' in text
    assert 'id="step-1-name-error">Give this step a name.' in text
    assert 'id="step-2-name-error">Another step is already named &#39;a&#39;.' in text
    assert 'id="step-2-job-error">Choose the job this step runs.' in text
    assert 'id="step-3-args-error">args must be a JSON object' in text
    assert 'aria-describedby=" step-1-name-error" aria-invalid="true"' in text

    jobs(conn, "taken")
    post(client, "/workflows", form("dup", [("a", "pull", [])]))
    again = post(client, "/workflows", form("dup", [("b", "taken", [])]))
    assert again.status_code == 422
    assert 'id="name-error">a workflow named &#39;dup&#39; already exists' in again.text
    too_long = post(client, "/workflows", form("x", [("s" * 201, "pull", [])]))
    assert too_long.status_code == 422 and 'id="step-0-name-error">a step name' in too_long.text
    assert count(conn, "workflows") == 1
    assert conn.execute("SELECT count(*) AS n FROM workflow_steps").fetchone()["n"] == 1


def test_add_and_remove_step_redraw_the_form_without_saving(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    jobs(conn, "pull", "shape", "mail")
    client = as_role("editor")
    added = post(client, "/workflows", form("etl", ETL[:2], op="add"))
    assert added.status_code == 200 and 'id="step-2-name"' in added.text
    assert 'value="" autofocus' in added.text.replace("\n", " ").replace("  ", " ") or (
        "autofocus" in added.text.split('id="step-2-name"')[1].split(">")[0]
    )
    # Removing the first step drops the edge to it and shifts the others up.
    removed = post(client, "/workflows", form("etl", ETL, op="remove:0"),
                   **{"HX-Request": "true"})  # fmt: skip
    assert removed.status_code == 200 and "<html" not in removed.text
    assert 'id="step-0-name" name="step_name"' in removed.text
    assert 'value="transform"' in removed.text and 'value="extract"' not in removed.text
    assert 'name="after_1" value="0" checked' in removed.text  # report still after transform
    assert 'name="after_0" value="1" checked' not in removed.text
    assert count(conn, "workflows") == 0


def test_a_viewer_sees_but_cannot_change_and_an_operator_may_only_run(
    as_role: Callable[[str], TestClient], conn: Conn, db_url: str
) -> None:
    jobs(conn, "pull", "shape", "mail")
    editor = as_role("editor")
    assert post(editor, "/workflows", form("etl", ETL)).status_code == 303
    editor.cookies.clear()

    viewer = as_role("viewer")
    page = viewer.get("/workflows/etl")
    assert page.status_code == 200 and 'role="img"' in page.text
    assert "Run now" not in page.text and "Delete workflow" not in page.text
    assert "New workflow" not in viewer.get("/workflows").text
    assert viewer.get("/workflows/new").status_code == 403
    assert viewer.get("/workflows/etl/edit").status_code == 403
    for path, data in [
        ("/workflows", form("other", ETL)),
        ("/workflows/etl", form("etl", ETL[:1])),
        ("/workflows/preview", form("etl", ETL)),
        ("/workflows/etl/delete", []),
        ("/workflows/etl/run", []),
    ]:
        assert post(viewer, path, data).status_code == 403, path
    assert count(conn, "workflows") == 1 and count(conn, "workflow_steps") == 3
    assert count(conn, "dag_runs") == 0
    viewer.cookies.clear()

    operator = as_role("operator")
    assert post(operator, "/workflows", form("other", ETL)).status_code == 403
    started = post(operator, "/workflows/etl/run", [])
    (dag_run_id,) = conn.execute("SELECT id FROM dag_runs").fetchone().values()
    assert started.status_code == 303 and started.headers["location"] == f"/dag-runs/{dag_run_id}"
    statuses = conn.execute("SELECT dag_node, status FROM job_runs ORDER BY id").fetchall()
    assert {(r["dag_node"], r["status"]) for r in statuses} == {
        ("extract", "pending"), ("transform", "blocked"), ("report", "blocked"),
    }  # fmt: skip
    page = operator.get("/workflows/etl").text
    assert 'class="dag-node status-blocked"' in page and ">blocked</text>" in page
    run = conn.execute("SELECT actor, action FROM audit_log WHERE action = 'workflow.run'")
    assert [dict(r) for r in run.fetchall()] == [{"actor": "operator", "action": "workflow.run"}]


def test_a_post_without_the_csrf_token_is_refused(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    jobs(conn, "pull")
    client = as_role("editor")
    from urllib.parse import urlencode

    body = urlencode(form("etl", [("a", "pull", [])]))
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    assert client.post("/workflows", content=body, headers=headers).status_code == 403
    assert count(conn, "workflows") == 0


def test_names_with_markup_are_shown_as_text(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    jobs(conn, EVIL)
    client = as_role("editor")
    created = post(client, "/workflows", form(EVIL, [(EVIL, EVIL, []), ("b", EVIL, [0])],
                                              description=EVIL))  # fmt: skip
    assert created.status_code == 303, created.text
    location = created.headers["location"]
    for path in ("/workflows", location, location + "/edit"):
        text = client.get(path).text
        assert "<script>alert" not in text, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, path


def test_delete_is_refused_while_a_schedule_runs_it_unless_it_goes_too(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    jobs(conn, "pull")
    client = as_role("editor")
    assert post(client, "/workflows", form("etl", [("a", "pull", [])])).status_code == 303
    schedules.create_schedule(conn, schedule_spec.ScheduleSpec(name="nightly", every_seconds=60,
                                                           workflow="etl"))  # fmt: skip
    page = client.get("/workflows/etl").text
    assert "Run by schedule nightly" in page and "Also delete these schedules" in page
    refused = post(client, "/workflows/etl/delete", [])
    assert refused.status_code == 409
    assert "run by schedule(s) &#39;nightly&#39;" in refused.text
    assert count(conn, "workflows") == 1 and count(conn, "schedules") == 1
    gone = post(client, "/workflows/etl/delete", [("with_schedules", "yes")])
    assert gone.status_code == 303
    assert count(conn, "workflows") == 0 and count(conn, "schedules") == 0
    audit = conn.execute("SELECT details FROM audit_log WHERE action = 'workflow.delete'")
    assert audit.fetchone()["details"]["before"]["schedules"] == ["nightly"]
    deleted = conn.execute("SELECT target_id FROM audit_log WHERE action = 'schedule.delete'")
    assert [r["target_id"] for r in deleted] == ["nightly"]  # its own record, not only the list


def test_unknown_workflows_are_404(as_role: Callable[[str], TestClient]) -> None:
    client = as_role("editor")
    assert client.get("/workflows/nope").status_code == 404
    assert client.get("/workflows/nope/edit").status_code == 404
    assert post(client, "/workflows/nope", form("nope", [])).status_code == 404


def test_versions_show_step_by_step_changes_and_roll_back_in_one_click(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    jobs(conn, "pull", "shape", "mail")
    client = as_role("editor")
    assert post(client, "/workflows", form("etl", ETL)).status_code == 303
    smaller = [("extract", "pull", []), ("report", "mail", [0])]
    assert post(client, "/workflows/etl", form("etl", smaller)).status_code == 303

    page = client.get("/workflows/etl/history").text
    assert "Version 2 (current)" in page and "Roll back to version 1" in page
    newest = page.split('id="version-')[1].split("</li>")[0]
    assert "<del>runs job shape, after extract</del>" in newest  # transform removed
    assert "(removed)" in newest
    assert "<del>runs job mail, after transform</del>" in newest
    assert "<ins>runs job mail, after extract</ins>" in newest
    (first,) = conn.execute("SELECT id FROM audit_log WHERE action = 'workflow.create'").fetchall()

    assert post(client, "/workflows/etl/rollback", [("version", "999999")]).status_code == 422
    back = post(client, "/workflows/etl/rollback", [("version", str(first["id"]))])
    assert back.status_code == 303 and back.headers["location"] == "/workflows/etl?rolled_back=1"
    assert count(conn, "workflow_steps") == 3 and count(conn, "workflow_edges") == 2
    rollback = conn.execute(
        "SELECT actor, details FROM audit_log WHERE action = 'workflow.rollback'"
    ).fetchone()
    assert rollback["actor"] == "editor"
    assert set(rollback["details"]["before"]["steps"]) == {"extract", "report"}
    assert set(rollback["details"]["after"]["steps"]) == {"extract", "transform", "report"}
    assert "Version 3 (current)" in client.get("/workflows/etl/history").text
    client.cookies.clear()

    viewer = as_role("viewer")
    assert "Roll back" not in viewer.get("/workflows/etl/history").text
    assert (
        post(viewer, "/workflows/etl/rollback", [("version", str(first["id"]))]).status_code == 403
    )


def test_job_versions_show_what_changed_and_roll_back(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    client = as_role("editor")
    job = {"name": "pull", "handler": "noop", "args": '{"a": 1}', "execution_model": "async",
           "priority": "1", "timeout_seconds": "60", "max_retries": "2"}  # fmt: skip
    assert post(client, "/jobs", list(job.items())).status_code == 303
    changed = {**job, "args": '{"a": 2}', "max_retries": "5"}
    assert post(client, "/jobs/pull", list(changed.items())).status_code == 303
    page = client.get("/jobs/pull/history").text
    assert "max retries" in page and "<del>2</del>" in page and "<ins>5</ins>" in page
    assert "<del>{&#34;a&#34;: 1}</del>" in page
    first = conn.execute("SELECT id FROM audit_log WHERE action = 'job.create'").fetchone()
    back = post(client, "/jobs/pull/rollback", [("version", str(first["id"]))])
    assert back.status_code == 303
    row = conn.execute("SELECT args, max_retries FROM job_definitions").fetchone()
    assert (row["args"], row["max_retries"]) == ({"a": 1}, 2)
    actions = conn.execute(
        "SELECT action FROM audit_log WHERE target_type = 'job' ORDER BY id"
    ).fetchall()
    assert [a["action"] for a in actions] == ["job.create", "job.update", "job.rollback"]
    assert client.get("/jobs/nope/history").status_code == 404


def test_a_workflow_too_large_for_the_editor_is_shown_but_edited_as_json(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    from app.catalog import workflows

    jobs(conn, "pull")
    chain = [f"s{i}" for i in range(250)]
    steps = {name: workflow_shapes.Step("pull") for name in chain}
    edges = list(itertools.pairwise(chain))
    workflows.define(conn, workflows.WorkflowSpec("big", steps, edges), actor="test")
    client = as_role("editor")
    page = client.get("/workflows/big")
    assert page.status_code == 200 and page.text.count('class="dag-node"') == 250
    edit = client.get("/workflows/big/edit").text
    assert "250 steps, more than the editor takes (200)" in edit and "step_name" not in edit


def test_a_step_whose_job_runs_a_disabled_handler_is_refused_next_to_the_steps(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    from app.handlers.gate import set_shell_enabled

    set_shell_enabled(conn, True, actor="test")
    create(conn, JobSpec(name="cleanup", handler="shell", args={"command": "true"}), actor="test")
    editor = as_role("editor")  # running commands needs an admin, enabled or not
    not_allowed = post(editor, "/workflows", form("nightly", [("clean", "cleanup", [])]))
    assert not_allowed.status_code == 403 and "Only an admin" in not_allowed.text
    set_shell_enabled(conn, False, actor="test")
    client = as_role("admin")
    refused = post(client, "/workflows", form("nightly", [("clean", "cleanup", [])]))
    assert refused.status_code == 422
    assert 'id="steps-error" role="alert">the shell handler is disabled' in refused.text
    assert count(conn, "workflows") == 0
