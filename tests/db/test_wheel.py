"""A built wheel works on its own: installed in a fresh virtualenv outside the checkout, it
migrates a database, serves the dashboard with its static files and runs a worker that
completes a run submitted through the public `sundial` package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.helpers.commands import REPO, free_port, wait_for_http
from tests.helpers.processes import query, wait_until

# What a source distribution holds; caches, virtualenvs and old builds stay behind.
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv*",
    ".sundial",
    ".hypothesis",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
)

APPLICATION_JOBS = """
from sundial import JobContext, handler


@handler("greet")
def greet(ctx: JobContext, name: str) -> dict:
    return {"hello": name, "run": ctx.run_id}
"""

SUBMIT = """
from sundial import Sundial

with Sundial() as client:
    print(client.submit("greet", {"name": "wheel"}))
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip"]
    run([*pip, "wheel", "-q", "--no-deps", "-w", str(dist), str(source)], tmp_path, _clean_env())
    (wheel,) = dist.glob("sundial-*.whl")
    return wheel


def install_in_fresh_venv(wheel: Path, venv: Path) -> Path:
    """Install `wheel` with its dependencies into a new virtualenv; return its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    run([*pip, "install", "-q", "--no-compile", str(wheel)], venv, _clean_env())
    return venv / "bin"


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything pointing back into the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TEST_DATABASE_URL")}
    env.pop("VIRTUAL_ENV", None)
    env.update(extra)
    return env


def test_wheel_installs_and_runs_outside_the_checkout(empty_db_url: str, tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    bin_dir = install_in_fresh_venv(wheel, tmp_path / "venv")
    project = tmp_path / "project"  # an application using Sundial, far from the checkout
    project.mkdir()
    (project / "greetings.py").write_text(APPLICATION_JOBS)
    env = _clean_env(
        DATABASE_URL=empty_db_url,
        SUNDIAL_LOG_FORMAT="text",
        SUNDIAL_POLL_SECONDS="0.2",
        SUNDIAL_HANDLERS="greetings",
        PYTHONPATH=str(project),
    )

    # Sundial and its assets come from the virtualenv, not from the checkout.
    where = "import app.core.resources as r; print(r.__file__); print(r.PROCFILE.read_text())"
    installed = run([str(bin_dir / "python"), "-c", where], project, env)
    assert installed.startswith(str(tmp_path / "venv")), installed
    assert "worker: sundial worker" in installed
    assert "migrated database from empty" in run(
        [str(bin_dir / "sundial"), "migrate"], project, env
    )

    port = free_port()
    with (tmp_path / "web.log").open("w") as web_log, (tmp_path / "worker.log").open("w") as log:
        web = subprocess.Popen(
            [str(bin_dir / "sundial"), "web", "--host", "127.0.0.1", "--port", str(port)],
            cwd=project,
            env=env,
            stdout=web_log,
            stderr=subprocess.STDOUT,
        )
        worker = subprocess.Popen(
            [str(bin_dir / "sundial"), "worker"],
            cwd=project,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_http(f"{base}/healthz", timeout=60, proc=web)
        assert "Sundial" in _get(f"{base}/")
        assert "body" in _get(f"{base}/static/sundial.css")
        assert _get(f"{base}/static/vendor/htmx/htmx-2.0.11.min.js")

        run_id = int(run([str(bin_dir / "python"), "-c", SUBMIT], project, env))
        wait_until(
            lambda: query(
                empty_db_url,
                "SELECT 1 FROM job_runs WHERE id = %s AND status = %s",
                run_id,
                "completed",
            ),
            f"run {run_id} completed",
            timeout=60,
        )
        (row,) = query(empty_db_url, "SELECT result FROM job_runs WHERE id = %s", run_id)
        assert row["result"] == {"hello": "wheel", "run": run_id}
    except AssertionError:
        print((tmp_path / "web.log").read_text(), (tmp_path / "worker.log").read_text())
        raise
    finally:
        for proc in (web, worker):
            proc.terminate()
            proc.wait(30)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200, url
        body: bytes = response.read()
        return body.decode()
