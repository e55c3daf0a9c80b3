"""The handler registry, `SUNDIAL_HANDLERS` loading, and the built-in handlers (with a
real local HTTP server on 127.0.0.1 and real shell commands)."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest

from app.executors import Executors
from app.handlers import (
    DuplicateHandler,
    HandlerModuleError,
    HandlerRegistry,
    UnknownHandler,
    default_registry,
    load_modules,
)
from app.handlers.builtin import crash, fail, noop, sleep
from app.handlers.shell import DISABLED_MESSAGE, CommandFailed, run_command
from app.handlers.webhook import RESPONSE_BODY_LIMIT, HttpCallFailed, call_url
from app.jobs import Cancelled, JobContext, JobSpec, NonRetryableError, Outcome, OutcomeStatus

_run_ids = itertools.count(1)
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy")


def context() -> JobContext:
    return JobContext(run_id=next(_run_ids), attempt=1, idempotency_key=None, fire_time=None)


def run_job(handler: str, model: str = "async", timeout: float = 10.0, **args: Any) -> Outcome:
    async def main() -> Outcome:
        executors = Executors(default_registry, thread_workers=2, process_workers=0)
        await executors.start()
        try:
            return await executors.run(JobSpec(next(_run_ids), 1, handler, args, model, timeout))
        finally:
            await executors.close(kill=True)

    return asyncio.run(main())


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until_gone(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return gone(pid)


# ---- registry ---------------------------------------------------------------------------


def test_decorator_registers_by_name_or_by_function_name() -> None:
    registry = HandlerRegistry()

    @registry.handler("send-report")
    async def send_report(ctx: JobContext) -> None: ...

    @registry.handler
    def cleanup(ctx: JobContext) -> None: ...

    @registry.handler()
    def archive(ctx: JobContext) -> None: ...

    assert registry.names() == ["archive", "cleanup", "send-report"]
    assert registry.get("send-report").fn is send_report
    assert registry.get("send-report").is_async
    assert not registry.get("cleanup").is_async
    assert "archive" in registry and "missing" not in registry and len(registry) == 3


def test_unknown_handler_is_a_key_error_listing_known_names() -> None:
    registry = HandlerRegistry()
    registry.register("b", lambda ctx: None)
    registry.register("a", lambda ctx: None)
    with pytest.raises(KeyError) as caught:
        registry.get("zzz")
    assert isinstance(caught.value, UnknownHandler)
    assert str(caught.value) == (
        "no handler named 'zzz' is registered on this worker (known: a, b)"
    )


def test_a_name_cannot_be_taken_by_a_second_function_but_re_registering_is_fine() -> None:
    registry = HandlerRegistry()

    def first(ctx: JobContext) -> None: ...

    def second(ctx: JobContext) -> None: ...

    registry.register("job", first)
    registry.register("job", first)
    with pytest.raises(DuplicateHandler, match=r"already registered by .*first"):
        registry.register("job", second)
    with pytest.raises(ValueError, match="non-empty string"):
        registry.register(" ", first)


def test_async_is_detected_through_partials_and_callable_objects() -> None:
    async def base(ctx: JobContext, n: int) -> int:
        return n

    class AsyncCallable:
        async def __call__(self, ctx: JobContext) -> None: ...

    registry = HandlerRegistry()
    registry.register("partial", functools.partial(base, n=1))
    registry.register("object", AsyncCallable())
    assert registry.get("partial").is_async and registry.get("object").is_async


def test_default_registry_has_the_builtins() -> None:
    assert {"noop", "sleep", "fail", "crash", "http", "shell"} <= set(default_registry.names())


def test_load_modules_registers_their_handlers() -> None:
    load_modules(["tests.fixtures_handlers"])
    assert "fixture_echo" in default_registry


def test_load_modules_names_the_module_that_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_handlers.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(HandlerModuleError, match=r"'broken_handlers'.*RuntimeError: boom"):
        load_modules(["broken_handlers"])
    with pytest.raises(HandlerModuleError, match=r"'no\.such\.module'.*ModuleNotFoundError"):
        load_modules(["no.such.module"])


# ---- noop, sleep, fail, crash -----------------------------------------------------------


def test_noop_and_sleep() -> None:
    assert asyncio.run(noop(context())) is None
    started = time.monotonic()
    asyncio.run(sleep(context(), seconds=0.1))
    assert 0.1 <= time.monotonic() - started < 0.5


@pytest.mark.parametrize("seconds", [-1, "abc", True, float("nan"), None])
def test_sleep_refuses_bad_seconds(seconds: Any) -> None:
    with pytest.raises(NonRetryableError, match="argument 'seconds'"):
        asyncio.run(sleep(context(), seconds=seconds))


def test_sleep_stops_once_the_cancel_flag_is_set() -> None:
    ctx = context()
    threading.Timer(0.1, ctx.cancel_event.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        asyncio.run(sleep(ctx, seconds=5))
    assert time.monotonic() - started < 1


def test_fail_raises_retryable_or_not() -> None:
    with pytest.raises(RuntimeError, match="the fail handler always fails"):
        asyncio.run(fail(context()))
    with pytest.raises(NonRetryableError, match="bad input"):
        asyncio.run(fail(context(), message="bad input", retryable=False))
    with pytest.raises(NonRetryableError, match="argument 'retryable'"):
        asyncio.run(fail(context(), retryable="no"))


def test_crash_refuses_unknown_signals_before_doing_anything() -> None:
    with pytest.raises(NonRetryableError, match="argument 'signal' must be one of KILL, SEGV"):
        crash(context(), signal="TERM")


def test_sleep_works_under_the_thread_model() -> None:
    assert run_job("sleep", "thread", seconds=0.05).status is OutcomeStatus.COMPLETED


# ---- shell ------------------------------------------------------------------------------


@pytest.fixture
def shell_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUNDIAL_ENABLE_SHELL_HANDLER", "true")


def test_shell_is_disabled_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUNDIAL_ENABLE_SHELL_HANDLER", raising=False)
    with pytest.raises(NonRetryableError) as caught:
        run_command(context(), command=["true"])
    assert str(caught.value) == DISABLED_MESSAGE
    outcome = run_job("shell", command="true")
    assert outcome.status is OutcomeStatus.FAILED and not outcome.retryable
    assert outcome.error is not None and "SUNDIAL_ENABLE_SHELL_HANDLER=true" in outcome.error


@pytest.mark.usefixtures("shell_enabled")
def test_shell_runs_a_list_or_a_string_with_env_and_cwd(tmp_path: Path) -> None:
    assert run_command(context(), command=["echo", "hello"]) == {
        "returncode": 0,
        "stdout": "hello\n",
        "stderr": "",
    }
    result = run_command(
        context(),
        command="echo $GREETING; pwd; echo oops >&2",
        env={"GREETING": "hi"},
        cwd=str(tmp_path),
    )
    assert result["stdout"] == f"hi\n{tmp_path}\n" and result["stderr"] == "oops\n"


@pytest.mark.usefixtures("shell_enabled")
def test_shell_non_zero_exit_fails_with_the_stderr_tail() -> None:
    with pytest.raises(CommandFailed, match="exited with code 3: went wrong"):
        run_command(context(), command="echo went wrong >&2; exit 3")


@pytest.mark.usefixtures("shell_enabled")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"command": []}, "argument 'command'"),
        ({"command": 5}, "argument 'command'"),
        ({"command": ["true"], "env": {"A": 1}}, "argument 'env'"),
        ({"command": ["true"], "timeout": -1}, "argument 'timeout'"),
        ({"command": ["/no/such/program"]}, "cannot run '/no/such/program'"),
    ],
)
def test_shell_refuses_bad_arguments(args: dict[str, Any], message: str) -> None:
    with pytest.raises(NonRetryableError, match=re.escape(message)):
        run_command(context(), **args)


@pytest.mark.usefixtures("shell_enabled")
def test_shell_kills_the_command_at_its_own_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(CommandFailed, match=re.escape("longer than its timeout of 0.2s")):
        run_command(context(), command=f"echo $$ > {pid_file}; exec sleep 30", timeout=0.2)
    assert wait_until_gone(int(pid_file.read_text()))


@pytest.mark.usefixtures("shell_enabled")
@pytest.mark.parametrize("model", ["thread", "subprocess"])
def test_shell_command_is_killed_when_the_job_times_out(tmp_path: Path, model: str) -> None:
    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file}; exec sleep 30"
    outcome = run_job("shell", model, timeout=0.5, command=command)
    assert outcome.status is OutcomeStatus.TIMED_OUT
    assert wait_until_gone(int(pid_file.read_text()))


# ---- http -------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(1)
        status, body = {
            "/ok": (200, "hello"),
            "/missing": (404, "no such page"),
            "/broken": (500, "server fell over"),
            "/big": (200, "é" * 5000),
            "/slow": (200, "late"),
        }.get(self.path, (404, "?"))
        self._answer(status, body.encode())

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        echo = {
            "body": data.decode(),
            "type": self.headers.get("Content-Type"),
            "x": self.headers.get("X-Token"),
        }
        self._answer(201, json.dumps(echo).encode())

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A local HTTP server on 127.0.0.1 (never any other address); yields its base URL."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def call(**args: Any) -> dict[str, Any]:
    return call_url(context(), **args)


def test_http_returns_status_and_body(server: str) -> None:
    assert call(url=f"{server}/ok") == {"status": 200, "body": "hello"}


def test_http_keeps_the_first_2kb_of_the_body(server: str) -> None:
    body = call(url=f"{server}/big")["body"]
    assert len(body.encode()) <= RESPONSE_BODY_LIMIT + 3 and body.startswith("éé")


def test_http_posts_json_or_a_body_with_headers(server: str) -> None:
    result = call(url=f"{server}/echo", method="post", json={"a": 1}, headers={"X-Token": "t"})
    assert result["status"] == 201
    assert json.loads(result["body"]) == {"body": '{"a": 1}', "type": "application/json", "x": "t"}
    result = call(url=f"{server}/echo", method="POST", body="plain")
    assert json.loads(result["body"])["body"] == "plain"


def test_http_4xx_is_not_retryable_and_5xx_is(server: str) -> None:
    with pytest.raises(NonRetryableError, match="answered 404: no such page"):
        call(url=f"{server}/missing")
    with pytest.raises(HttpCallFailed, match="answered 500: server fell over"):
        call(url=f"{server}/broken")
    missing, broken = (
        run_job("http", url=f"{server}/missing"),
        run_job("http", url=f"{server}/broken"),
    )
    assert missing.status is OutcomeStatus.FAILED and not missing.retryable
    assert broken.status is OutcomeStatus.FAILED and broken.retryable
    assert run_job("http", url=f"{server}/ok").result == {"status": 200, "body": "hello"}


def test_http_expect_status_decides_what_succeeds(server: str) -> None:
    assert call(url=f"{server}/missing", expect_status=[404])["status"] == 404
    with pytest.raises(NonRetryableError, match="answered 200"):
        call(url=f"{server}/ok", expect_status=[204])


def test_http_connection_errors_and_timeouts_are_retryable(server: str) -> None:
    with pytest.raises(HttpCallFailed, match="timed out"):
        call(url=f"{server}/slow", timeout=0.2)
    closed = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = closed.server_address[1]
    closed.server_close()
    with pytest.raises(HttpCallFailed, match="failed"):
        call(url=f"http://127.0.0.1:{port}/ok")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "argument 'url'"),
        ({"url": "ftp://127.0.0.1/x"}, "argument 'url'"),
        ({"url": "http://127.0.0.1/", "method": "FETCH"}, "argument 'method'"),
        ({"url": "http://127.0.0.1/", "json": {}, "body": "x"}, "either argument 'json' or 'body'"),
        ({"url": "http://127.0.0.1/", "headers": {"a": 1}}, "argument 'headers'"),
        ({"url": "http://127.0.0.1/", "timeout": 0}, "argument 'timeout'"),
        ({"url": "http://127.0.0.1/", "expect_status": 200}, "argument 'expect_status'"),
    ],
)
def test_http_refuses_bad_arguments(args: dict[str, Any], message: str) -> None:
    with pytest.raises(NonRetryableError, match=re.escape(message)):
        call(**args)
