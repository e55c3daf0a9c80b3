"""Schemathesis over the OpenAPI document against a real `sundial web`: generated valid
and invalid requests to every operation, with an admin write token. No answer may be a
5xx, and every answer (status, content type, body) must be one the document describes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.web.api_client import make_token

# Examples per operation and a time budget keep the run within about a minute in CI.
MAX_EXAMPLES = "15"
MAX_SECONDS = "60"


def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(
    live_server: str, db_url: str, tmp_path: Path
) -> None:
    token = make_token(db_url, "admin", "write")
    result = subprocess.run(
        [
            sys.executable, "-m", "schemathesis.cli", "run",
            f"{live_server}/api/v1/openapi.json",
            "--url", live_server,
            "--header", f"Authorization: Bearer {token}",
            "--checks", "not_a_server_error,status_code_conformance,"
            "content_type_conformance,response_schema_conformance,"
            "response_headers_conformance",
            "--max-examples", MAX_EXAMPLES,
            "--max-time", MAX_SECONDS,
            "--seed", "1",
            # One worker: two threads of hypothesis can trip CPython 3.11's ast.parse
            # ("AST constructor recursion depth mismatch") while describing strategies.
            "--workers", "1",
            "--generation-allow-x00", "false",
            "--suppress-health-check", "all",
            "--no-shrink",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # schemathesis keeps a cache folder where it runs
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-2000:]
