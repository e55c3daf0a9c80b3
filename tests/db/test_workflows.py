"""Workflows: define from the CLI, run now, refuse bad definitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import run_sundial
from tests.helpers.processes import query
from tests.helpers.workflows import ETL, define_jobs, write


def test_define_show_and_run_a_workflow(db_url: str, tmp_path: Path) -> None:
    define_jobs(db_url)
    added = run_sundial(db_url, "workflow", "add", "etl", write(tmp_path, ETL))
    assert added.returncode == 0, added.stderr
    shown = json.loads(run_sundial(db_url, "workflow", "show", "etl").stdout)
    assert shown["steps"]["t2"] == {"job": "transform", "args": {"part": 2}}
    assert sorted(map(tuple, shown["edges"])) == [
        ("extract", "t1"), ("extract", "t2"), ("t1", "load"), ("t2", "load"),
    ]  # fmt: skip
    ran = run_sundial(db_url, "workflow", "run", "etl")
    assert ran.returncode == 0, ran.stderr
    dag = json.loads(ran.stdout)
    rows = {
        r["dag_node"]: r
        for r in query(db_url, "SELECT * FROM job_runs WHERE dag_run_id = %s", dag["dag_run_id"])
    }
    assert rows["t1"]["args"] == {"seconds": 0.1, "part": 1}  # step args over job args
    assert rows["t1"]["handler"] == "sleep" and rows["t1"]["job_id"] is not None
    assert {n: r["status"] for n, r in rows.items()} == {
        "extract": "pending", "t1": "blocked", "t2": "blocked", "load": "blocked",
    }  # fmt: skip
    (dag_run,) = query(db_url, "SELECT name, workflow_id FROM dag_runs")
    assert dag_run["name"] == "etl" and dag_run["workflow_id"] is not None


def test_replace_a_workflow_and_refuse_deleting_a_job_it_uses(db_url: str, tmp_path: Path) -> None:
    define_jobs(db_url)
    run_sundial(db_url, "workflow", "add", "etl", write(tmp_path, ETL))
    smaller = {
        "steps": {"extract": {"job": "extract"}, "load": {"job": "load", "after": ["extract"]}}
    }
    replaced = run_sundial(db_url, "workflow", "replace", "etl", write(tmp_path, smaller))
    assert replaced.returncode == 0, replaced.stderr
    assert set(json.loads(run_sundial(db_url, "workflow", "show", "etl").stdout)["steps"]) == {
        "extract", "load",
    }  # fmt: skip
    refused = run_sundial(db_url, "job", "delete", "load")
    assert refused.returncode == 2 and "a workflow still uses it" in refused.stderr
    assert run_sundial(db_url, "workflow", "delete", "etl").returncode == 0
    assert run_sundial(db_url, "job", "delete", "load").returncode == 0


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"steps": {"a": {"job": "nope"}}}, "there is no job definition named 'nope'"),
        (
            {"steps": {"a": {"job": "load", "after": ["b"]}, "b": {"job": "load", "after": ["a"]}}},
            "step `a` cannot run after `b`: `b` already runs after `a` (a → b → a)",
        ),
        ({"steps": {"a": {"job": "load"}}, "edges": [["a", "x"]]}, "unknown node 'x'"),
        ({"steps": {}}, 'non-empty "steps"'),
        ({"steps": {"a": {"job": "load", "retries": 3}}}, "unknown key 'retries'"),
    ],
)
def test_bad_workflows_are_refused_with_a_sentence(
    db_url: str, tmp_path: Path, doc: Any, message: str
) -> None:
    define_jobs(db_url)
    result = run_sundial(db_url, "workflow", "add", "bad", write(tmp_path, doc))
    assert result.returncode == 2
    assert message in result.stderr
    assert query(db_url, "SELECT count(*) AS n FROM workflows") == [{"n": 0}]


def test_duplicate_names_are_refused(db_url: str, tmp_path: Path) -> None:
    define_jobs(db_url)
    again = run_sundial(db_url, "job", "add", "load", "--handler", "noop")
    assert again.returncode == 2 and "already exists" in again.stderr
    run_sundial(db_url, "workflow", "add", "etl", write(tmp_path, ETL))
    dup = run_sundial(db_url, "workflow", "add", "etl", write(tmp_path, ETL))
    assert dup.returncode == 2 and "already exists" in dup.stderr
