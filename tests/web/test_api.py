"""The JSON API over real HTTP against a real `sundial web`: tokens, every endpoint,
idempotency under concurrency, and its refusals (401, 403, 404, 409, 413, 422)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from app.people import tokens
from app.web.api import core
from tests.helpers.api_client import assert_documented, make_token, request
from tests.helpers.processes import query
from tests.helpers.waits import db_now


def test_tokens_are_refused_when_missing_invalid_expired_or_revoked(
    live_server: str, db_url: str, conn: psycopg.Connection[Any]
) -> None:
    missing = request(live_server, "GET", "/api/v1/runs")
    assert missing.status == 401
    assert "Bearer" in missing.error["message"]
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert request(live_server, "GET", "/api/v1/runs", "sundial_nope").status == 401

    expired = make_token(
        db_url, "viewer", "read", lifetime=timedelta(minutes=1),
        now=db_now(conn) - timedelta(minutes=2),
    )  # fmt: skip
    answer = request(live_server, "GET", "/api/v1/runs", expired)
    assert (answer.status, answer.error["message"]) == (401, "this API token has expired")

    good = make_token(db_url, "viewer", "read", username="reader")
    assert request(live_server, "GET", "/api/v1/runs", good).status == 200
    used = query(db_url, "SELECT last_used_at FROM api_tokens WHERE token_hash = %s",
                 tokens.hash_secret(good))  # fmt: skip
    assert used[0]["last_used_at"] is not None
    (row,) = query(db_url, "SELECT id FROM api_tokens WHERE token_hash = %s",
                   tokens.hash_secret(good))  # fmt: skip
    tokens.revoke(conn, row["id"], actor="test")
    answer = request(live_server, "GET", "/api/v1/runs", good)
    assert (answer.status, answer.error["message"]) == (401, "this API token was revoked")
    # Only the hash is stored, and revoking was audited.
    assert not query(db_url, "SELECT 1 FROM api_tokens WHERE token_hash = %s", good)
    assert query(db_url, "SELECT 1 FROM audit_log WHERE action = 'token.revoke'")


def test_read_scope_and_low_roles_cannot_write(live_server: str, db_url: str) -> None:
    read_only = make_token(db_url, "admin", "read")
    answer = request(live_server, "POST", "/api/v1/runs", read_only, {"handler": "noop"})
    assert answer.status == 403
    assert "read scope" in answer.error["message"]
    viewer = make_token(db_url, "viewer", "write")
    answer = request(live_server, "POST", "/api/v1/runs", viewer, {"handler": "noop"})
    assert answer.status == 403
    assert "operator role" in answer.error["message"]
    operator = make_token(db_url, "operator", "write")
    answer = request(live_server, "POST", "/api/v1/schedules", operator,
                     {"name": "n", "cron": "0 * * * *", "handler": "noop"})  # fmt: skip
    assert answer.status == 403
    assert query(db_url, "SELECT count(*) AS n FROM job_runs")[0]["n"] == 0
    assert query(db_url, "SELECT count(*) AS n FROM schedules")[0]["n"] == 0


def test_runs_submit_show_list_cancel_retry(live_server: str, db_url: str) -> None:
    token = make_token(db_url)
    submitted = request(live_server, "POST", "/api/v1/runs", token,
                        {"handler": "noop", "args": {"n": 1}, "priority": 5,
                         "delay_seconds": 3600})  # fmt: skip
    assert submitted.status == 201, submitted.body
    run = submitted.body["run"]
    assert (run["status"], run["priority"], run["args"]) == ("pending", 5, {"n": 1})

    shown = request(live_server, "GET", f"/api/v1/runs/{run['id']}", token)
    assert (shown.status, shown.body["id"], shown.body["attempts"]) == (200, run["id"], [])
    assert request(live_server, "GET", "/api/v1/runs/999999", token).status == 404
    # a run id is a whole number: no run lives at any other address
    assert request(live_server, "GET", "/api/v1/runs/abc", token).status == 404

    batch = request(live_server, "POST", "/api/v1/runs/batch", token,
                    {"runs": [{"handler": "noop"} for _ in range(4)]})  # fmt: skip
    assert batch.status == 201
    assert [r["created"] for r in batch.body["runs"]] == [True] * 4

    first = request(live_server, "GET", "/api/v1/runs?limit=2", token)
    assert first.status == 200
    assert [r["id"] for r in first.body["runs"]] == [batch.body["runs"][3]["id"],
                                                      batch.body["runs"][2]["id"]]  # fmt: skip
    rest = request(live_server, "GET", f"/api/v1/runs?limit=10&before={first.body['next']}", token)
    assert len(rest.body["runs"]) == 3 and rest.body["next"] is None
    only = request(live_server, "GET", "/api/v1/runs?status=pending&handler=noop&limit=1", token)
    assert only.status == 200 and len(only.body["runs"]) == 1
    unknown = request(live_server, "GET", "/api/v1/runs?colour=red", token)
    assert (unknown.status, unknown.error["field"]) == (422, "colour")

    cancelled = request(live_server, "POST", f"/api/v1/runs/{run['id']}/cancel", token)
    assert (cancelled.status, cancelled.body["status"]) == (200, "cancelled")
    again = request(live_server, "POST", f"/api/v1/runs/{run['id']}/cancel", token)
    assert again.status == 409 and "already ended cancelled" in again.error["message"]
    retried = request(live_server, "POST", f"/api/v1/runs/{run['id']}/retry", token)
    assert (retried.status, retried.body["run"]["status"]) == (200, "pending")
    not_failed = request(live_server, "POST", f"/api/v1/runs/{run['id']}/retry", token)
    assert not_failed.status == 409
    actions = {r["action"] for r in query(db_url, "SELECT action FROM audit_log")}
    assert {"run.cancel", "run.retry"} <= actions


def test_dags_and_workflows(live_server: str, db_url: str, conn: psycopg.Connection[Any]) -> None:
    token = make_token(db_url, "editor")
    dag = request(live_server, "POST", "/api/v1/dags", token, {
        "name": "etl",
        "nodes": {"a": {"handler": "noop"}, "b": {"handler": "noop", "after": ["a"]}},
    })  # fmt: skip
    assert dag.status == 201, dag.body
    shown = request(live_server, "GET", f"/api/v1/dags/{dag.body['dag_run_id']}", token)
    assert {r["dag_node"]: r["status"] for r in shown.body["runs"]} == {
        "a": "pending", "b": "blocked"}  # fmt: skip
    cycle = request(live_server, "POST", "/api/v1/dags", token, {
        "nodes": {"a": {"handler": "noop", "after": ["b"]}, "b": {"handler": "noop",
                                                                  "after": ["a"]}},
    })  # fmt: skip
    assert cycle.status == 422 and "cycle" in cycle.error["message"]

    from app.catalog import job_definitions, workflows
    from app.catalog.job_definitions import JobSpec

    job_definitions.create(conn, JobSpec(name="hello", handler="noop"), actor="test")
    workflows.define(
        conn, workflows.parse_spec("flow", {"steps": {"one": {"job": "hello"}}}), actor="test"
    )
    assert request(live_server, "GET", "/api/v1/jobs", token).body["jobs"][0]["name"] == "hello"
    assert request(live_server, "GET", "/api/v1/jobs/hello", token).body["handler"] == "noop"
    assert request(live_server, "GET", "/api/v1/jobs/nope", token).status == 404
    listed = request(live_server, "GET", "/api/v1/workflows", token)
    assert listed.body["workflows"][0]["name"] == "flow"
    assert request(live_server, "GET", "/api/v1/workflows/flow", token).body["steps"] == {
        "one": {"job": "hello", "args": {}}}  # fmt: skip
    ran = request(live_server, "POST", "/api/v1/workflows/flow/runs", token)
    assert ran.status == 201 and list(ran.body["runs"]) == ["one"]
    by_job = request(live_server, "POST", "/api/v1/runs", token, {"job": "hello", "priority": 9})
    assert by_job.status == 201
    assert (by_job.body["run"]["handler"], by_job.body["run"]["priority"]) == ("noop", 9)
    assert by_job.body["run"]["job_id"] is not None


def test_jobs_create_update_delete(
    live_server: str, db_url: str, conn: psycopg.Connection[Any]
) -> None:
    token = make_token(db_url, "editor")
    made = request(live_server, "POST", "/api/v1/jobs", token,
                   {"name": "report", "handler": "noop", "args": {"to": "ops"},
                    "priority": 4})  # fmt: skip
    assert made.status == 201, made.body
    assert (made.body["job"]["args"], made.body["job"]["priority"]) == ({"to": "ops"}, 4)
    assert made.body["job"]["timeout_seconds"] == 300  # Sundial's default
    again = request(live_server, "POST", "/api/v1/jobs", token,
                    {"name": "report", "handler": "noop"})  # fmt: skip
    assert (again.status, again.error["field"]) == (409, "name")
    bad = request(live_server, "POST", "/api/v1/jobs", token,
                  {"name": "x", "handler": "noop", "priority": 10**6})  # fmt: skip
    assert (bad.status, bad.error["field"]) == (422, "priority")
    shell = request(live_server, "POST", "/api/v1/jobs", token,
                    {"name": "rm", "handler": "shell", "args": {"command": "true"}})  # fmt: skip
    assert (shell.status, shell.error["field"]) == (403, "handler")
    from app.handlers.gate import set_shell_enabled

    set_shell_enabled(conn, True, "test")  # the fleet allows it; still an admin's choice
    admin = make_token(db_url, "admin")
    by_admin = request(live_server, "POST", "/api/v1/jobs", admin,
                       {"name": "rm", "handler": "shell", "args": {"command": "true"}})  # fmt: skip
    assert by_admin.status == 201, by_admin.body
    assert request(live_server, "PATCH", "/api/v1/jobs/rm", token, {"priority": 2}).status == 403

    changed = request(live_server, "PATCH", "/api/v1/jobs/report", token,
                      {"name": "daily-report", "max_retries": 0})  # fmt: skip
    assert changed.status == 200, changed.body
    job = changed.body["job"]
    assert (job["name"], job["max_retries"], job["priority"]) == ("daily-report", 0, 4)
    assert request(live_server, "PATCH", "/api/v1/jobs/report", token,
                   {"priority": 1}).status == 404  # fmt: skip
    taken = request(live_server, "PATCH", "/api/v1/jobs/daily-report", admin, {"name": "rm"})
    assert (taken.status, taken.error["field"]) == (409, "name")
    empty = request(live_server, "PATCH", "/api/v1/jobs/daily-report", token, {})
    assert empty.status == 422
    null = request(live_server, "PATCH", "/api/v1/jobs/daily-report", token, {"handler": None})
    assert (null.status, null.error["field"]) == (422, "handler")

    flow = request(live_server, "POST", "/api/v1/workflows", token,
                   {"name": "f", "steps": {"a": {"job": "daily-report"}}})  # fmt: skip
    assert flow.status == 201, flow.body
    used = request(live_server, "DELETE", "/api/v1/jobs/daily-report", token)
    assert used.status == 409 and "workflow" in used.error["message"]
    assert request(live_server, "DELETE", "/api/v1/workflows/f", token).status == 200
    gone = request(live_server, "DELETE", "/api/v1/jobs/daily-report", token)
    assert (gone.status, gone.body) == (200, {"schedules_deleted": []})
    twice = request(live_server, "DELETE", "/api/v1/jobs/daily-report", token)
    assert (twice.status, twice.error["message"]) == (404, "there is no job named 'daily-report'")
    actions = [r["action"] for r in query(
        db_url, "SELECT action FROM audit_log WHERE target_type = 'job' "
        "AND actor LIKE 'editor-write (api token %%' ORDER BY id")]  # fmt: skip
    assert actions == ["job.create", "job.update", "job.delete"]


def test_workflows_create_replace_delete(live_server: str, db_url: str) -> None:
    token = make_token(db_url, "editor")
    for name in ("extract", "load"):
        assert request(live_server, "POST", "/api/v1/jobs", token,
                       {"name": name, "handler": "noop"}).status == 201  # fmt: skip
    made = request(live_server, "POST", "/api/v1/workflows", token, {
        "name": "etl", "description": "nightly",
        "steps": {"e": {"job": "extract"}, "l": {"job": "load", "args": {"n": 1},
                                                 "after": ["e"]}},
    })  # fmt: skip
    assert made.status == 201, made.body
    assert (made.body["edges"], made.body["steps"]["l"]) == (
        [["e", "l"]], {"job": "load", "args": {"n": 1}})  # fmt: skip
    twice = request(live_server, "POST", "/api/v1/workflows", token,
                    {"name": "etl", "steps": {"e": {"job": "extract"}}})  # fmt: skip
    assert (twice.status, twice.error["field"]) == (409, "name")
    cycle = request(live_server, "PUT", "/api/v1/workflows/etl", token, {
        "steps": {"e": {"job": "extract", "after": ["l"]}, "l": {"job": "load",
                                                               "after": ["e"]}},
    })  # fmt: skip
    assert cycle.status == 422 and "(e → l → e)" in cycle.error["message"]
    unknown = request(live_server, "PUT", "/api/v1/workflows/etl", token,
                      {"steps": {"x": {"job": "nope"}}})  # fmt: skip
    assert unknown.status == 404 and "nope" in unknown.error["message"]
    replaced = request(live_server, "PUT", "/api/v1/workflows/etl", token,
                       {"steps": {"only": {"job": "load"}}})  # fmt: skip
    assert replaced.status == 200, replaced.body
    assert (list(replaced.body["steps"]), replaced.body["edges"]) == (["only"], [])
    missing = request(live_server, "PUT", "/api/v1/workflows/nope", token,
                      {"steps": {"only": {"job": "load"}}})  # fmt: skip
    assert missing.status == 404

    scheduled = request(live_server, "POST", "/api/v1/schedules", token,
                        {"name": "nightly", "cron": "0 2 * * *", "workflow": "etl"})  # fmt: skip
    assert scheduled.status == 201, scheduled.body
    refused = request(live_server, "DELETE", "/api/v1/workflows/etl", token)
    assert refused.status == 409 and "nightly" in refused.error["message"]
    gone = request(live_server, "DELETE", "/api/v1/workflows/etl?with_schedules=true", token)
    assert (gone.status, gone.body) == (200, {"schedules_deleted": ["nightly"]})
    assert query(db_url, "SELECT count(*) AS n FROM schedules")[0]["n"] == 0
    assert request(live_server, "GET", "/api/v1/workflows/etl", token).status == 404
    operator = make_token(db_url, "operator")
    assert request(live_server, "POST", "/api/v1/workflows", operator,
                   {"name": "w", "steps": {"a": {"job": "load"}}}).status == 403  # fmt: skip
    actions = [
        r["action"]
        for r in query(
            db_url, "SELECT action FROM audit_log WHERE target_type = 'workflow' ORDER BY id"
        )
    ]
    assert actions == ["workflow.create", "workflow.update", "workflow.delete"]


def test_schedules(live_server: str, db_url: str) -> None:
    token = make_token(db_url, "editor")
    created = request(live_server, "POST", "/api/v1/schedules", token, {
        "name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Paris", "handler": "noop",
    })  # fmt: skip
    assert created.status == 201, created.body
    assert created.body["schedule"]["job"] == "nightly"
    assert request(live_server, "GET", "/api/v1/schedules", token).body["schedules"][0][
        "name"] == "nightly"  # fmt: skip
    nexts = request(live_server, "GET", "/api/v1/schedules/nightly/next-fires?count=3", token)
    assert nexts.status == 200 and len(nexts.body["fires"]) == 3
    assert all(f["local_time"].endswith("02:30:00") for f in nexts.body["fires"])
    assert_documented(live_server, token, "NextFiresOut", nexts.body)

    bad_cron = request(live_server, "PATCH", "/api/v1/schedules/nightly", token, {"cron": "61 *"})
    assert (bad_cron.status, bad_cron.error["field"]) == (422, "cron")
    # refusals only the domain can make name their field too
    never = request(live_server, "PATCH", "/api/v1/schedules/nightly", token,
                    {"cron": "0 0 31 2 *"})  # fmt: skip
    assert (never.status, never.error["field"]) == (422, "cron")
    backwards = request(live_server, "PATCH", "/api/v1/schedules/nightly", token, {
        "start_at": "2031-01-01T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"})  # fmt: skip
    assert (backwards.status, backwards.error["field"]) == (422, "end_at")
    taken = request(live_server, "POST", "/api/v1/schedules", token, {
        "name": "nightly", "cron": "0 1 * * *", "job": "nightly"})  # fmt: skip
    assert (taken.status, taken.error["field"]) == (409, "name")
    changed = request(live_server, "PATCH", "/api/v1/schedules/nightly", token,
                      {"cron": "0 3 * * *"})  # fmt: skip
    assert changed.status == 200 and changed.body["schedule"]["cron"] == "0 3 * * *"
    paused = request(live_server, "POST", "/api/v1/schedules/nightly/pause", token,
                     {"note": "maintenance"})  # fmt: skip
    assert paused.status == 200 and paused.body["paused"] is True
    resumed = request(live_server, "POST", "/api/v1/schedules/nightly/resume", token)
    assert resumed.body["paused"] is False
    started = request(live_server, "POST", "/api/v1/schedules/nightly/run-now", token)
    assert started.status == 201 and started.body["run_id"] is not None
    fires = request(live_server, "GET", "/api/v1/schedules/nightly/fires", token)
    assert [f["outcome"] for f in fires.body["fires"]] == ["enqueued"]
    assert_documented(live_server, token, "FireListOut", fires.body)
    of_schedule = request(live_server, "GET", "/api/v1/runs?schedule=nightly", token)
    assert [r["id"] for r in of_schedule.body["runs"]] == [started.body["run_id"]]
    assert request(live_server, "DELETE", "/api/v1/schedules/nightly", token).status == 204
    assert request(live_server, "GET", "/api/v1/schedules/nightly", token).status == 404
    actions = [r["action"] for r in query(db_url, "SELECT action FROM audit_log ORDER BY id")]
    assert actions[-6:] == ["schedule.create", "schedule.update", "schedule.pause",
                            "schedule.resume", "schedule.run_now", "schedule.delete"]  # fmt: skip


def test_idempotency_same_payload_200_other_payload_409(live_server: str, db_url: str) -> None:
    token = make_token(db_url)
    payload = {"handler": "noop", "args": {"invoice": 7}, "idempotency_key": "inv-7"}
    first = request(live_server, "POST", "/api/v1/runs", token, payload)
    again = request(live_server, "POST", "/api/v1/runs", token, payload)
    assert (first.status, again.status) == (201, 200)
    assert again.body["run"]["id"] == first.body["run"]["id"] and not again.body["created"]
    other_args = request(live_server, "POST", "/api/v1/runs", token,
                         {**payload, "args": {"invoice": 8}})  # fmt: skip
    assert (other_args.status, other_args.error["field"]) == (409, "args")
    assert "different args" in other_args.error["message"]
    other_priority = request(live_server, "POST", "/api/v1/runs", token,
                             {**payload, "priority": 9})  # fmt: skip
    assert (other_priority.status, other_priority.error["field"]) == (409, "priority")
    assert query(db_url, "SELECT count(*) AS n FROM job_runs")[0]["n"] == 1


def test_concurrent_submits_with_one_key_make_one_run(live_server: str, db_url: str) -> None:
    token = make_token(db_url)
    payload = {"handler": "noop", "args": {"order": 1}, "idempotency_key": "order-1"}
    answers: list[Any] = []
    start = threading.Barrier(8)

    def submit() -> None:
        start.wait()
        answers.append(request(live_server, "POST", "/api/v1/runs", token, payload))

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.status for a in answers) == [200] * 7 + [201]
    assert len({a.body["run"]["id"] for a in answers}) == 1
    assert query(db_url, "SELECT count(*) AS n FROM job_runs")[0]["n"] == 1


def test_refusals_name_the_field_and_bodies_have_a_limit(live_server: str, db_url: str) -> None:
    token = make_token(db_url)
    unknown = request(live_server, "POST", "/api/v1/runs", token,
                      {"handler": "noop", "colour": "red"})  # fmt: skip
    assert unknown.status == 422
    assert unknown.error == {"message": "unknown field 'colour'", "field": "colour"}
    priority = request(live_server, "POST", "/api/v1/runs", token,
                       {"handler": "noop", "priority": 10**6})  # fmt: skip
    assert (priority.status, priority.error["field"]) == (422, "priority")
    nested = request(
        live_server,
        "POST",
        "/api/v1/runs/batch",
        token,
        {"runs": [{"handler": "noop"}, {"handler": "noop", "timeout_seconds": 0}]},
    )
    assert (nested.status, nested.error["field"]) == (422, "runs.1.timeout_seconds")
    neither = request(live_server, "POST", "/api/v1/runs", token, {"args": {}})
    assert (neither.status, neither.error["field"]) == (422, "handler")
    not_json = request(live_server, "POST", "/api/v1/runs", token, raw=b"{nope")
    assert not_json.status == 400
    huge = json.dumps({"handler": "noop", "args": {"x": "y" * (2 * 1024 * 1024)}}).encode()
    too_big = request(live_server, "POST", "/api/v1/runs", token, raw=huge)
    assert too_big.status == 413 and "at most" in too_big.error["message"]
    assert query(db_url, "SELECT count(*) AS n FROM job_runs")[0]["n"] == 0
    missing = request(live_server, "GET", "/api/v1/nothing-here", token)
    assert missing.status == 404 and "error" in missing.body
    wrong_method = request(live_server, "PUT", "/api/v1/runs", token, {})
    assert wrong_method.status == 405 and "error" in wrong_method.body


def test_a_body_far_beyond_the_limit_is_refused_before_it_is_sent(
    live_server: str, db_url: str
) -> None:
    """A declared length past what the server will read is answered at once: the client
    that waits for the answer before sending gets a 413 and never sends its body."""
    token = make_token(db_url)
    host, port = live_server.removeprefix("http://").split(":")
    declared = core.DRAIN_BYTES + 1
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"POST /api/v1/runs HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n\r\n".encode()
        )
        answer = sock.makefile("rb").read()  # until the server closes the connection
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert "at most 1,048,576 bytes" in json.loads(body)["error"]["message"]
    assert query(db_url, "SELECT count(*) AS n FROM job_runs")[0]["n"] == 0


def test_an_oversize_body_without_a_declared_length_is_refused(
    live_server: str, db_url: str
) -> None:
    token = make_token(db_url)
    pieces = [b'{"handler": "noop", "args": {"x": "', b"y" * (core.MAX_BODY_BYTES + 10), b'"}}']
    connection = http.client.HTTPConnection(live_server.removeprefix("http://"), timeout=30)
    connection.putrequest("POST", "/api/v1/runs")
    connection.putheader("Authorization", f"Bearer {token}")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    for piece in pieces:
        connection.send(b"%x\r\n%s\r\n" % (len(piece), piece))
    connection.send(b"0\r\n\r\n")
    response = connection.getresponse()
    assert response.status == 413
    assert "at most" in json.loads(response.read())["error"]["message"]
    connection.close()
    assert query(db_url, "SELECT count(*) AS n FROM job_runs")[0]["n"] == 0


def test_csrf_still_guards_cookie_requests_to_the_api(live_server: str, db_url: str) -> None:
    token = make_token(db_url)
    # A browser's session cookie without a bearer token: refused by the CSRF check.
    cookie = {"Cookie": "sundial_session=stolen; sundial_csrf=seed"}
    refused = request(live_server, "POST", "/api/v1/runs", None, {"handler": "noop"},
                      headers=cookie)  # fmt: skip
    assert refused.status == 403 and "security token" in refused.body
    # A bearer token needs no CSRF token, with or without cookies.
    assert request(live_server, "POST", "/api/v1/runs", token, {"handler": "noop"},
                   headers=cookie).status == 201  # fmt: skip
    # A cookie-less request without a token reaches the API and is told to authenticate.
    assert request(live_server, "POST", "/api/v1/runs", None, {"handler": "noop"}).status == 401


def test_openapi_document_and_reference_page(live_server: str, db_url: str) -> None:
    doc = request(live_server, "GET", "/api/v1/openapi.json").body
    assert doc["openapi"] == "3.1.0"
    assert {"/api/v1/runs", "/api/v1/runs/{run_id}", "/api/v1/schedules/{name}/next-fires",
            "/api/v1/dags", "/api/v1/workflows/{name}/runs",
            "/api/v1/jobs/{name}/runs"} <= set(doc["paths"])  # fmt: skip
    run_in = doc["components"]["schemas"]["RunIn"]
    assert run_in["additionalProperties"] is False
    assert run_in["properties"]["priority"]["anyOf"][0]["maximum"] == 32767
    page = request(live_server, "GET", "/api/v1/docs")
    assert page.status == 200
    assert "POST" in page.body and "/api/v1/runs/{run_id}/cancel" in page.body
    assert "<script" not in page.body.split("</head>")[1]


def test_readyz_says_why_it_is_not_ready(live_server: str, db_url: str) -> None:
    ready = request(live_server, "GET", "/readyz")
    assert ready.status == 200 and ready.body["status"] == "ready"
    query(db_url, "UPDATE alembic_version SET version_num = '0001' RETURNING 1")
    stale = request(live_server, "GET", "/readyz")
    assert stale.status == 503
    assert "at migration 0001" in stale.body["reason"]


@pytest.mark.parametrize("scope", ["read", "write"])
def test_metrics_needs_a_token_of_any_scope(live_server: str, db_url: str, scope: str) -> None:
    assert request(live_server, "GET", "/metrics").status == 401
    token = make_token(db_url, "viewer", scope)
    answer = request(live_server, "GET", "/metrics", token)
    assert answer.status == 200
    assert "sundial_pending_runs" in answer.body


def test_every_operation_refuses_a_missing_token_and_read_scope_writes(
    live_server: str, db_url: str
) -> None:
    doc = request(live_server, "GET", "/api/v1/openapi.json").body
    read_only = make_token(db_url, "admin", "read")
    filled = {"run_id": "1", "dag_run_id": "00000000-0000-0000-0000-000000000001", "name": "x",
              "action_id": "1", "id": "1"}  # fmt: skip
    checked = 0
    for path, methods in doc["paths"].items():
        concrete = path.format(**filled)
        for method in methods:
            verb = method.upper()
            body = {} if "requestBody" in methods[method] else None
            anonymous = request(live_server, verb, concrete, None, body)
            assert anonymous.status == 401, (verb, path, anonymous.body)
            if verb != "GET":
                scoped = request(live_server, verb, concrete, read_only, body)
                assert scoped.status == 403, (verb, path, scoped.body)
            checked += 1
    assert checked == 51  # breakers 4, history 1, bulk 4, time spent 2, backfills 3, job runs 1,
    # notifications 3
    assert query(db_url, "SELECT count(*) AS n FROM audit_log WHERE action LIKE 'run.%%' "
                 "OR action LIKE 'schedule.%%' OR action LIKE 'job.%%' "
                 "OR action LIKE 'workflow.%%'")[0]["n"] == 0  # fmt: skip
