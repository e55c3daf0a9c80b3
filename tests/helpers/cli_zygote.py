"""`sundial` commands as processes forked from one that has imported Sundial already.

Each command is still a process of its own, with its arguments, environment, working
directory, output and exit status, running `app.cli.main` as `python -m app.cli` does; it
only skips the second of imports (SQLAlchemy, SQLModel, pydantic) that every command pays
before its first line, which the suite paid some hundreds of times.

The zygote serves one pytest process, one command at a time, over a Unix socket; it ends
when that process does (its stdin closes). `SUNDIAL_TEST_FORK_CLI=0` runs every command as
a fresh interpreter instead.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

_lock = threading.Lock()
_zygote: tuple[subprocess.Popen[bytes], str] | None = None


def enabled() -> bool:
    return os.environ.get("SUNDIAL_TEST_FORK_CLI", "1") != "0" and hasattr(os, "fork")


def run(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `sundial *argv` in a forked child with `env`, from the checkout; like
    `subprocess.run(..., capture_output=True, text=True, timeout=timeout)`."""
    with _lock, tempfile.TemporaryDirectory() as scratch:
        out, err = Path(scratch, "out"), Path(scratch, "err")
        request = {"argv": argv, "env": env, "cwd": str(REPO), "out": str(out), "err": str(err)}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(_socket_path())
            client.sendall(json.dumps(request).encode() + b"\n")
            client.settimeout(timeout)
            answers = client.makefile("r")
            pid = int(answers.readline())
            try:
                code = int(answers.readline())
            except TimeoutError:
                os.killpg(pid, signal.SIGKILL)  # the command and what it started
                raise subprocess.TimeoutExpired(argv, timeout) from None
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "app.cli", *argv],
            code,
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
        )


def _socket_path() -> str:
    global _zygote
    if _zygote is None or _zygote[0].poll() is not None:
        path = tempfile.mktemp(prefix="sundial-cli-", suffix=".sock")
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.cli_zygote", path],
            cwd=REPO,
            stdin=subprocess.PIPE,
        )
        for _ in range(600):  # the socket appears once the imports are done
            if os.path.exists(path) or process.poll() is not None:
                break
            threading.Event().wait(0.05)
        if not os.path.exists(path):
            raise RuntimeError("the command zygote did not start")
        _zygote = (process, path)
        atexit.register(_stop, process)
    return _zygote[1]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the zygote with the pytest process: its stdin closes, and it returns."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# ---- the zygote itself -------------------------------------------------------------------


def _serve(path: str) -> None:
    from app.cli.main import build_parser

    build_parser(None)  # every command's module imported once, here
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".new")
    server.listen()
    os.rename(path + ".new", path)
    try:
        while True:
            ready, _, _ = select.select([server, sys.stdin], [], [])
            if sys.stdin in ready:
                return  # the pytest process ended (or closed our stdin)
            conn, _ = server.accept()
            with conn:
                request = json.loads(conn.makefile("r").readline())
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    server.close()
                    _child(request)
                with contextlib.suppress(OSError):  # (a caller that gave up is gone)
                    conn.sendall(f"{pid}\n".encode())
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    finally:
        server.close()
        os.unlink(path)


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become `sundial *argv` and exit with its status."""
    code = 1
    try:
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd, name, mode in ((0, os.devnull, os.O_RDONLY), (1, request["out"], os.O_WRONLY),
                               (2, request["err"], os.O_WRONLY)):  # fmt: skip
            opened = os.open(name, mode | (os.O_CREAT | os.O_TRUNC if fd else 0), 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
            line_buffering=True,
        )  # fmt: skip
        sys.argv = [str(Path(request["cwd"], "app", "cli", "__main__.py")), *request["argv"]]
        from app.cli.main import main

        code = main(request["argv"])
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    _serve(sys.argv[1])
