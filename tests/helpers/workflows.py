"""Workflows for tests: an ETL workflow and the jobs it runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers.commands import run_sundial

ETL = {
    "description": "nightly export",
    "steps": {
        "extract": {"job": "extract"},
        "t1": {"job": "transform", "args": {"part": 1}, "after": ["extract"]},
        "t2": {"job": "transform", "args": {"part": 2}, "after": ["extract"]},
        "load": {"job": "load"},
    },
    "edges": [["t1", "load"], ["t2", "load"]],
}


def define_jobs(db_url: str) -> None:
    for name, handler, args in (
        ("extract", "noop", "{}"),
        ("transform", "sleep", '{"seconds": 0.1, "part": 0}'),
        ("load", "noop", "{}"),
    ):
        result = run_sundial(db_url, "job", "add", name, "--handler", handler, "--args", args)
        assert result.returncode == 0, result.stderr


def write(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(doc))
    return str(path)
