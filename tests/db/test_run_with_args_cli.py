"""`sundial job run` and `sundial workflow run --args`: one run (or DAG run) now with
chosen arguments, checked against the handler's declared schema like the dashboard's form,
and audited; through the real command."""

from __future__ import annotations

from typing import Any

import psycopg

from app.catalog import workflows
from app.catalog.workflows import WorkflowSpec
from app.dags.workflow_shapes import Step
from tests.helpers.commands import run_sundial
from tests.helpers.handler_schemas import live_worker_declaring
from tests.helpers.processes import query


def runs(db_url: str) -> list[Any]:
    return [r["args"] for r in query(db_url, "SELECT args FROM job_runs ORDER BY id")]


def test_job_run_starts_one_run_with_the_jobs_or_the_given_arguments(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    live_worker_declaring(conn)
    added = run_sundial(db_url, "job", "add", "nightly", "--handler", "report",
                        "--args", '{"email": "ops@example.com"}')  # fmt: skip
    assert added.returncode == 0, added.stderr
    own = run_sundial(db_url, "job", "run", "nightly")
    assert own.returncode == 0, own.stderr
    chosen = run_sundial(db_url, "job", "run", "nightly", "--args",
                         '{"email": "boss@example.com", "retries": 5}')  # fmt: skip
    assert chosen.returncode == 0, chosen.stderr
    ids = [r["id"] for r in query(db_url, "SELECT id FROM job_runs ORDER BY id")]
    assert [own.stdout.strip(), chosen.stdout.strip()] == [str(i) for i in ids]
    assert runs(db_url) == [{"email": "ops@example.com"},
                            {"email": "boss@example.com", "retries": 5}]  # fmt: skip

    for given, said in [
        ('{"email": "a@example.com", "retries": "x"}', "retries must be a whole number"),
        ('{"retries": 1}', "email is required"),
        ("[1]", "args must be a JSON object"),
    ]:
        refused = run_sundial(db_url, "job", "run", "nightly", "--args", given)
        assert refused.returncode == 2 and said in refused.stderr, (given, refused.stderr)
    unknown = run_sundial(db_url, "job", "run", "nothing")
    assert unknown.returncode == 2 and "there is no job named 'nothing'" in unknown.stderr
    assert len(runs(db_url)) == 2
    audited = query(db_url, "SELECT actor FROM audit_log WHERE action = 'job.run'")
    assert len(audited) == 2 and all(a["actor"].startswith("cli") for a in audited)


def test_workflow_run_takes_arguments_by_step(db_url: str, conn: psycopg.Connection[Any]) -> None:
    assert run_sundial(db_url, "job", "add", "load", "--handler", "noop").returncode == 0
    workflows.define(conn, WorkflowSpec("etl", {"one": Step("load", {"x": 1})}), actor="test")
    ran = run_sundial(db_url, "workflow", "run", "etl", "--args", '{"one": {"x": 2}}')
    assert ran.returncode == 0, ran.stderr
    assert runs(db_url) == [{"x": 2}]
    for given, said in [('{"ghost": {}}', "has no step named 'ghost'"),
                        ('{"one": 1}', "--args must map step names to JSON objects")]:  # fmt: skip
        refused = run_sundial(db_url, "workflow", "run", "etl", "--args", given)
        assert refused.returncode == 2 and said in refused.stderr, (given, refused.stderr)
    assert runs(db_url) == [{"x": 2}]
