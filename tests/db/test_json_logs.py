"""Every line a Sundial process or its job children write is one JSON object: the web's
startup lines and access log, and a child's uncaught exception. Real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers.commands import REPO, free_port, sundial_cmd, sundial_env, wait_for_http
from tests.helpers.processes import query, services
from tests.helpers.waits import wait_until


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every non-empty line of `text` parsed as JSON (a line that is not fails the test)."""
    lines = []
    for line in text.splitlines():
        if line.strip():
            try:
                lines.append(json.loads(line))
            except ValueError:
                raise AssertionError(f"not a JSON line: {line!r}\n\n{text}") from None
    return lines


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_web_writes_its_startup_and_an_access_log_as_json(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with services(db_url, tmp_path) as start:
        web = start("web", "--host", "127.0.0.1", "--port", str(port), SUNDIAL_LOG_FORMAT="json")
        wait_for_http(f"{base}/healthz", proc=web.proc)
        assert get(f"{base}/nowhere?token=do-not-log-me") == 404
        wait_until(lambda: "/nowhere" in web.log(), "the access line", 20, web)
        web.stop()  # uvicorn ends by the signal it was sent, once shut down
        log = web.log()
    lines = json_lines(log)
    assert "do-not-log-me" not in log  # query strings can hold sign-in tokens
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # uvicorn's own lines
    access = [line for line in lines if line["logger"] == "sundial.access"]
    missing = next(line for line in access if line["path"] == "/nowhere")
    assert missing["method"] == "GET" and missing["status"] == 404
    assert missing["client"] == "127.0.0.1" and missing["duration_ms"] >= 0
    healthz = next(line for line in access if line["path"] == "/healthz")
    assert healthz["status"] == 200 and healthz["process"] == "web"
    # The test suite hashes passwords cheaply (tests/conftest.py), and the web says so.
    cheap = [line for line in lines if "SUNDIAL_PASSWORD_HASH_COST" in line["msg"]]
    assert [line["level"] for line in cheap] == ["warning"]


def test_an_exception_escaping_a_job_child_is_one_json_line() -> None:
    child = subprocess.run(
        [sys.executable, "-m", "app.executors.child"],
        input=b"{not a request",
        capture_output=True,
        cwd=REPO,
        timeout=60,
    )
    assert child.returncode != 0
    (line,) = json_lines(child.stderr.decode())
    assert line["level"] == "error" and line["process"] == "job-child"
    assert "JSONDecodeError" in line["msg"] and "Traceback" in line["exc"]


def test_a_handler_thread_dying_in_a_subprocess_child_is_a_json_line_of_the_worker(
    db_url: str, tmp_path: Path
) -> None:
    env = {"SUNDIAL_LOG_FORMAT": "json", "SUNDIAL_HANDLERS": "tests.helpers.json_log_handlers"}
    submitted = subprocess.run(
        sundial_cmd("submit", "thread_raises", "--execution-model", "subprocess"),
        env=sundial_env(db_url, **env),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    run_id = int(submitted.stdout.split()[-1])
    with services(db_url, tmp_path) as start:
        worker = start("worker", **env)

        def completed() -> bool:
            rows = query(db_url, "SELECT status FROM job_runs WHERE id = %s", run_id)
            return rows[0]["status"] == "completed"

        wait_until(completed, "the run to complete", 60, worker)
        wait_until(lambda: "the helper thread failed" in worker.log(), "the thread's line", 20)
        assert worker.stop() == 0
        log = worker.log()
    lines = json_lines(log)
    (uncaught,) = [line for line in lines if "the helper thread failed" in line["msg"]]
    assert uncaught["process"] == "job-child" and "thread helper" in uncaught["msg"]
    assert "Traceback" in uncaught["exc"]
