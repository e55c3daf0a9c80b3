"""`sundial` commands and services as processes forked from one that has imported Sundial.

Each is still a process of its own, with its arguments, environment, working directory,
output, signals and exit status, running `app.cli.main` as `python -m app.cli` does; it
only skips the second of imports (SQLAlchemy, SQLModel, pydantic) that every command and
service pays before its first line, which the suite paid some thousand times.

The zygote serves one pytest process over a Unix socket, each command on a connection of
its own that reports the child's pid and then its exit status; it ends when that pytest
process does (its stdin closes). `SUNDIAL_TEST_FORK_CLI=0` starts a fresh interpreter for
each instead.
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

_lock = threading.Lock()  # one zygote per pytest process, started by the first caller
_zygote: tuple[subprocess.Popen[bytes], str] | None = None


def enabled() -> bool:
    return os.environ.get("SUNDIAL_TEST_FORK_CLI", "1") != "0" and hasattr(os, "fork")


def run(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `sundial *argv` in a forked child with `env`, from the checkout; like
    `subprocess.run(..., capture_output=True, text=True, timeout=timeout)`."""
    with tempfile.TemporaryDirectory() as scratch:
        out, err = Path(scratch, "out"), Path(scratch, "err")
        process = _fork(argv, env, out=out, err=err)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the command and what it started
            process.wait()
            raise
        return subprocess.CompletedProcess(
            process.args, code, out.read_text(errors="replace"), err.read_text(errors="replace")
        )


def start(argv: list[str], env: dict[str, str], log: Path) -> ForkedProcess:
    """Start `sundial *argv` (a service) in a forked child with `env`, its output and
    errors appended to `log`; like `subprocess.Popen(..., stdout=log, stderr=STDOUT)`."""
    return _fork(argv, env, out=log, err=None)


class ForkedProcess:
    """The `subprocess.Popen` calls the tests make, for a child of the zygote: signals go
    to its pid; its exit status comes over the connection that started it."""

    def __init__(self, connection: socket.socket, argv: list[str]) -> None:
        self._connection = connection
        self._answers = connection.makefile("r")
        self.args = [sys.executable, "-m", "app.cli", *argv]
        self.pid = int(self._answers.readline())
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self._connection], [], [], 0)
            if ready:
                self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ready, _, _ = select.select([self._connection], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        self.returncode = int(self._answers.readline())
        self._answers.close()
        self._connection.close()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _fork(argv: list[str], env: dict[str, str], *, out: Path, err: Path | None) -> ForkedProcess:
    request = {"argv": argv, "env": env, "cwd": str(REPO), "out": str(out),
               "err": None if err is None else str(err)}  # fmt: skip
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(_socket_path())
        connection.sendall(json.dumps(request).encode() + b"\n")
        return ForkedProcess(connection, argv)
    except BaseException:
        connection.close()
        raise


def _socket_path() -> str:
    global _zygote
    with _lock:
        if _zygote is None or _zygote[0].poll() is not None:
            _zygote = _start_zygote()
        return _zygote[1]


def _start_zygote() -> tuple[subprocess.Popen[bytes], str]:
    path = tempfile.mktemp(prefix="sundial-zygote-", suffix=".sock")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.zygote", path], cwd=REPO, stdin=subprocess.PIPE
    )
    atexit.register(_stop, process)
    for _ in range(1200):  # the socket appears once the imports are done
        if os.path.exists(path) or process.poll() is not None:
            break
        threading.Event().wait(0.05)
    if not os.path.exists(path):
        raise RuntimeError("the zygote of sundial processes did not start")
    return process, path


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
            connection, _ = server.accept()
            request = json.loads(connection.makefile("r").readline())
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(request)  # never returns
            threading.Thread(target=_report, args=(connection, pid), daemon=True).start()
    finally:
        server.close()
        os.unlink(path)


def _report(connection: socket.socket, pid: int) -> None:
    """Tell the caller the child's pid, then, once it ends, its exit status."""
    with connection, contextlib.suppress(OSError):  # (a caller that gave up is gone)
        connection.sendall(f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become `sundial *argv` and exit with its status."""
    code = 1
    try:
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # the zygote's socket and its other callers' connections
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if request["err"] is None:  # a service: output and errors appended to its log
            log = os.open(request["out"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
        else:
            for fd, name in ((1, request["out"]), (2, request["err"])):
                opened = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(opened, fd)
                os.close(opened)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        # unbuffered, as PYTHONUNBUFFERED (which the tests set) makes them: a service's log
        # lines are read while it runs
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
            write_through=True,
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
        sys.stderr.flush()
        # as Python does: end by the signal, so the caller sees -SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            _as_the_interpreter_ends()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _as_the_interpreter_ends() -> None:
    """Wait for the threads still running, as the interpreter does before it exits (the
    child leaves by `os._exit`, so that nothing of the zygote's runs again)."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()


if __name__ == "__main__":
    _serve(sys.argv[1])
