""" "Run now" on a job: a form of the handler's declared arguments (or a JSON editor),
filled from the last run started by hand, refused next to the field at fault with nothing
started, and on success the new run's page; operators only, audited, CSRF-checked."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from app.catalog import job_definitions, workflows
from app.catalog.job_fields import JobSpec
from app.catalog.workflows import WorkflowSpec
from app.dags.workflow_shapes import Step
from app.handlers.gate import set_shell_enabled
from app.web.workflows import MAX_EDITOR_STEPS
from tests.helpers.api_client import make_token, request
from tests.helpers.databases import count
from tests.helpers.handler_schemas import error_of, live_worker_declaring
from tests.helpers.web import post

Conn = psycopg.Connection[Any]


def make_job(conn: Conn, name: str = "nightly", handler: str = "report", **args: Any) -> None:
    spec = JobSpec(name=name, handler=handler, args=args, priority=7, queue="reports")
    job_definitions.create(conn, spec, actor="test")


def runs(conn: Conn) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT id, handler, args, priority, queue, job_id IS NOT NULL AS of_job "
        "FROM job_runs ORDER BY id"
    ).fetchall()


def test_the_form_has_a_labelled_field_per_declared_argument_with_the_jobs_args(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    live_worker_declaring(conn)
    make_job(conn, email="ops@example.com", retries=2)
    client = as_role("operator")
    assert 'href="/jobs/nightly/run"' in client.get("/jobs/nightly").text
    page = client.get("/jobs/nightly/run")
    assert page.status_code == 200
    html = page.text
    assert '<label for="arg-1">Email <span class="muted">(required)</span></label>' in html
    assert 'name="args.email" value="ops@example.com"' in html
    assert re.search(r'name="args.retries" value="2"\s+type="number" step="1"', html)
    assert 'type="checkbox" id="arg-3" name="args.urgent" value="on" >' in html  # unticked
    assert '<option value="plain"' in html and '<option value="loud"' in html
    assert "Filled in with the job's own arguments" in html
    assert 'name="csrf_token"' in html and 'name="args"' not in html


def test_a_bad_value_is_refused_next_to_its_field_and_nothing_starts(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    live_worker_declaring(conn)
    make_job(conn, email="ops@example.com")
    client = as_role("operator")
    form = {"args_for": "report", "args.email": "a@example.com", "args.retries": "three"}
    not_whole = post(client, "/jobs/nightly/run", form)
    assert not_whole.status_code == 422
    assert error_of(not_whole.text, "arg-2") == "retries must be a whole number"
    assert 'value="three"' in not_whole.text and "Nothing was started" in not_whole.text

    missing = post(client, "/jobs/nightly/run", {"args_for": "report", "args.retries": "1"})
    assert missing.status_code == 422
    assert error_of(missing.text, "arg-1") == "email is required"

    wrong_choice = post(client, "/jobs/nightly/run", {**form, "args.retries": "1",
                                                      "args.tone": "shouty"})  # fmt: skip
    assert wrong_choice.status_code == 422
    assert error_of(wrong_choice.text, "arg-4") == "tone must be one of: plain, loud"
    assert runs(conn) == []
    assert count(conn, "audit_log WHERE action = 'job.run'") == 0


def test_starting_opens_the_run_is_audited_and_is_offered_next_time(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    live_worker_declaring(conn)
    make_job(conn, email="ops@example.com")
    client = as_role("operator")
    form = {"args_for": "report", "args.email": "boss@example.com", "args.retries": "5",
            "args.urgent": "on", "args.tone": "loud"}  # fmt: skip
    started = post(client, "/jobs/nightly/run", form)
    assert started.status_code == 303
    (run,) = runs(conn)
    assert started.headers["location"] == f"/runs/{run['id']}"
    want = {"email": "boss@example.com", "retries": 5, "urgent": True, "tone": "loud"}
    assert run == {"id": run["id"], "handler": "report", "args": want, "priority": 7,
                   "queue": "reports", "of_job": True}  # fmt: skip
    audited = conn.execute(
        "SELECT actor, target_id, details FROM audit_log WHERE action = 'job.run'"
    ).fetchall()
    assert audited == [{"actor": "operator", "target_id": "nightly",
                        "details": {"before": None,
                                    "after": {"run_id": run["id"], "args": want}}}]  # fmt: skip
    assert job_definitions.get(conn, "nightly")["args"] == {"email": "ops@example.com"}
    run_page = client.get(started.headers["location"]).text  # its history names who
    assert "Started by hand (run now)" in run_page and "Submitted" not in run_page

    again = client.get("/jobs/nightly/run").text
    assert "Filled in from your last run on" in again
    assert 'name="args.email" value="boss@example.com"' in again
    assert 'name="args.urgent" value="on" checked' in again
    assert '<option value="loud" selected>' in again

    other = as_role("admin").get("/jobs/nightly/run").text
    assert "Filled in from the last run operator started on" in other


def test_without_a_schema_a_json_editor_is_checked_as_a_json_object(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    make_job(conn, handler="noop", seconds=5)
    client = as_role("operator")
    page = client.get("/jobs/nightly/run").text
    shown = re.search(r'<textarea id="args" name="args"[^>]*>([^<]*)</textarea>', page)
    assert shown and shown[1].replace("&#34;", '"') == '{\n  "seconds": 5\n}'
    assert '<label for="args">Arguments for this run (JSON object)</label>' in page

    broken = post(client, "/jobs/nightly/run", {"args": '{"seconds": '})
    assert broken.status_code == 422
    assert (error_of(broken.text, "args") or "").startswith("args are not valid JSON")
    assert "{&#34;seconds&#34;: </textarea>" in broken.text  # what was typed stays
    a_list = post(client, "/jobs/nightly/run", {"args": "[1, 2]"})
    assert a_list.status_code == 422
    assert error_of(a_list.text, "args") == 'args must be a JSON object, like {"key": 1}'.replace(
        '"', "&#34;"
    )
    assert runs(conn) == []

    started = post(client, "/jobs/nightly/run", {"args": '{"seconds": 0.1}'})
    assert started.status_code == 303
    assert [r["args"] for r in runs(conn)] == [{"seconds": 0.1}]
    assert "{\n  &#34;seconds&#34;: 0.1\n}" in client.get("/jobs/nightly/run").text


def test_only_operators_start_runs_with_a_csrf_token_and_unknown_jobs_are_404(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    make_job(conn, handler="noop")
    viewer = as_role("viewer")
    assert "/jobs/nightly/run" not in viewer.get("/jobs/nightly").text
    assert viewer.get("/jobs/nightly/run").status_code == 403
    assert post(viewer, "/jobs/nightly/run", {"args": "{}"}).status_code == 403
    operator = as_role("operator")
    forged = operator.post("/jobs/nightly/run", data={"args": "{}"}, follow_redirects=False)
    assert forged.status_code == 403
    assert operator.get("/jobs/nothing/run").status_code == 404
    assert post(operator, "/jobs/nothing/run", {"args": "{}"}).status_code == 404
    assert runs(conn) == []


def make_workflow(conn: Conn) -> None:
    make_job(conn, "extract", email="ops@example.com")
    make_job(conn, "load", handler="noop", batch=10)
    steps = {"extract": Step("extract"), "load": Step("load", {"to": "db"})}
    workflows.define(conn, WorkflowSpec("etl", steps, [("extract", "load")]), actor="test")


def test_a_workflow_form_has_each_steps_arguments_in_the_order_they_run(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    live_worker_declaring(conn)
    make_workflow(conn)
    client = as_role("operator")
    assert 'href="/workflows/etl/run"' in client.get("/workflows/etl").text
    html = client.get("/workflows/etl/run").text
    assert html.index("Step extract") < html.index("Step load")
    assert "<legend>Arguments for step extract</legend>" in html
    assert 'id="s0-arg-1" name="s0.args.email" value="ops@example.com"' in html
    assert '<label for="s1-args">Arguments for step load (JSON object)</label>' in html
    shown = re.search(r'<textarea id="s1-args" name="s1.args"[^>]*>([^<]*)</textarea>', html)
    assert shown and json.loads(shown[1].replace("&#34;", '"')) == {"batch": 10, "to": "db"}
    assert "Filled in with each step's own arguments" in html


def test_a_workflow_run_is_refused_step_by_step_or_started_and_opened(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    live_worker_declaring(conn)
    make_workflow(conn)
    client = as_role("operator")
    form = {"s0.step": "extract", "s0.args_for": "report", "s0.args.email": "a@example.com",
            "s0.args.retries": "x", "s1.step": "load", "s1.args": "{nope"}  # fmt: skip
    refused = post(client, "/workflows/etl/run", form)
    assert refused.status_code == 422
    assert error_of(refused.text, "s0-arg-2") == "retries must be a whole number"
    assert (error_of(refused.text, "s1-args") or "").startswith("args are not valid JSON")
    assert 'value="x"' in refused.text and "{nope</textarea>" in refused.text
    assert count(conn, "dag_runs") == 0 and count(conn, "job_runs") == 0

    form = {**form, "s0.args.retries": "4", "s0.args.email": "", "s1.args": '{"to": "lake"}'}
    missing = post(client, "/workflows/etl/run", form)  # the schema's rule, checked in the domain
    assert missing.status_code == 422
    assert error_of(missing.text, "s0-arg-1") == "step extract: email is required"
    assert count(conn, "dag_runs") == 0

    started = post(client, "/workflows/etl/run", {**form, "s0.args.email": "b@example.com"})
    assert started.status_code == 303
    (dag_run_id,) = conn.execute("SELECT id FROM dag_runs").fetchone().values()
    assert started.headers["location"] == f"/dag-runs/{dag_run_id}"
    got = conn.execute("SELECT dag_node, args FROM job_runs ORDER BY id").fetchall()
    want = {"extract": {"email": "b@example.com", "retries": 4, "urgent": False},
            "load": {"to": "lake"}}  # fmt: skip
    assert {r["dag_node"]: r["args"] for r in got} == want
    (after,) = (
        conn.execute(
            "SELECT details -> 'after' -> 'args' FROM audit_log WHERE action = 'workflow.run'"
        )
        .fetchone()
        .values()
    )
    assert after == want
    assert client.get(started.headers["location"]).status_code == 200

    again = client.get("/workflows/etl/run").text
    assert "Filled in from your last run on" in again
    assert 'name="s0.args.email" value="b@example.com"' in again
    assert "{\n  &#34;to&#34;: &#34;lake&#34;\n}</textarea>" in again


def test_the_api_starts_a_job_or_a_workflow_with_arguments_checked_the_same_way(
    live_server: str, db_url: str, conn: Conn
) -> None:
    live_worker_declaring(conn)
    make_workflow(conn)
    token = make_token(db_url, "operator")
    bad = request(live_server, "POST", "/api/v1/jobs/extract/runs", token,
                  {"args": {"email": "a@example.com", "retries": "three"}})  # fmt: skip
    assert bad.status == 422
    assert bad.error == {"message": "retries must be a whole number", "field": "args.retries"}
    unknown = request(live_server, "POST", "/api/v1/jobs/nothing/runs", token, {})
    assert unknown.status == 404
    bad_step = request(live_server, "POST", "/api/v1/workflows/etl/runs", token,
                       {"args": {"extract": {"retries": 1}}})  # fmt: skip
    assert bad_step.status == 422
    assert bad_step.error == {"message": "step extract: email is required",
                              "field": "step:extract.args.email"}  # fmt: skip
    no_step = request(live_server, "POST", "/api/v1/workflows/etl/runs", token,
                      {"args": {"ghost": {}}})  # fmt: skip
    assert no_step.status == 422 and no_step.error["field"] == "steps"
    assert runs(conn) == []

    own = request(live_server, "POST", "/api/v1/jobs/extract/runs", token)
    assert own.status == 201 and own.body["args"] == {"email": "ops@example.com"}
    chosen = request(live_server, "POST", "/api/v1/jobs/extract/runs", token,
                     {"args": {"email": "b@example.com", "urgent": True}})  # fmt: skip
    assert chosen.status == 201
    assert (chosen.body["args"], chosen.body["priority"], chosen.body["queue"]) == (
        {"email": "b@example.com", "urgent": True}, 7, "reports")  # fmt: skip
    dag = request(live_server, "POST", "/api/v1/workflows/etl/runs", token,
                  {"args": {"load": {"to": "lake"}}})  # fmt: skip
    assert dag.status == 201
    got = conn.execute(
        "SELECT dag_node, args FROM job_runs WHERE dag_run_id IS NOT NULL ORDER BY id"
    ).fetchall()
    assert {r["dag_node"]: r["args"] for r in got} == {
        "extract": {"email": "ops@example.com"}, "load": {"to": "lake"}}  # fmt: skip
    audited = conn.execute(
        "SELECT action, actor FROM audit_log WHERE action IN ('job.run', 'workflow.run') "
        "ORDER BY id"
    ).fetchall()
    assert [a["action"] for a in audited] == ["job.run", "job.run", "workflow.run"]
    assert {a["actor"] for a in audited} == {"operator-write (api token 1)"}


def test_only_an_admin_starts_a_job_that_runs_commands(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    set_shell_enabled(conn, True, "test")
    spec = JobSpec(name="cleanup", handler="shell", args={"command": ["true"]})
    job_definitions.create(conn, spec, actor="test")
    operator = as_role("operator")
    assert 'href="/jobs/cleanup/run"' not in operator.get("/jobs/cleanup").text
    refused = post(operator, "/jobs/cleanup/run", {"args": '{"command": ["rm", "-rf", "/"]}'})
    assert refused.status_code == 403 and "admin may start work" in refused.text
    assert runs(conn) == []
    admin = as_role("admin")
    assert 'href="/jobs/cleanup/run"' in admin.get("/jobs/cleanup").text
    assert post(admin, "/jobs/cleanup/run", {"args": '{"command": ["true"]}'}).status_code == 303
    assert [r["args"] for r in runs(conn)] == [{"command": ["true"]}]


def test_a_workflow_too_large_to_list_starts_with_each_steps_own_arguments(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    make_job(conn, "tick", handler="noop", n=1)
    steps = {f"s{i}": Step("tick") for i in range(MAX_EDITOR_STEPS + 1)}
    workflows.define(conn, WorkflowSpec("big", steps), actor="test")
    client = as_role("operator")
    page = client.get("/workflows/big/run").text
    assert f"This workflow has {MAX_EDITOR_STEPS + 1} steps, too many to list here" in page
    assert "<textarea" not in page
    assert post(client, "/workflows/big/run", {}).status_code == 303
    assert count(conn, "job_runs WHERE args = '{\"n\": 1}'") == MAX_EDITOR_STEPS + 1
