"""Running `sundial` and its services as a person would: the command, its environment for a
test database, a free port, and waiting for a server to answer.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers import zygote
from tests.helpers.waits import wait_until

REPO = Path(__file__).resolve().parents[2]


def sundial_env(db_url: str, **extra: str) -> dict[str, str]:
    """Environment for a `sundial` child process pointed at `db_url`."""
    env = dict(os.environ)
    env.pop("TEST_DATABASE_URL", None)
    env.update(
        DATABASE_URL=db_url,
        SUNDIAL_LOG_FORMAT="text",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def sundial_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", *args]


def start_dev(env: dict[str, str], port: int, log_path: Path) -> subprocess.Popen[bytes]:
    """`sundial dev --port PORT` in a session of its own (stop it with its group), its
    output in `log_path`."""
    with log_path.open("w") as log:
        return subprocess.Popen(
            sundial_cmd("dev", "--port", str(port)),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )


def run_sundial(db_url: str | None, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the real `sundial` command to completion and capture its output (in a process
    forked from one with Sundial imported: `tests.helpers.zygote`)."""
    environment = sundial_env(db_url, **env) if db_url else {**os.environ, **env}
    if zygote.enabled():
        return zygote.run(list(args), environment, timeout=120)
    return subprocess.run(
        sundial_cmd(*args),
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def wait_for_http(
    url: str, timeout: float = 20.0, proc: subprocess.Popen[Any] | None = None
) -> None:
    def answers() -> bool:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    wait_until(answers, f"{url} to answer", timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
