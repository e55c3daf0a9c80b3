"""The handler registry, `SUNDIAL_HANDLERS` loading, and the built-in handlers (with a
real local HTTP server on 127.0.0.1 and real shell commands)."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

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
from app.handlers.builtin import BUILTINS, fail, noop, sleep
from app.handlers.chaos import crash
from app.handlers.jobs import (
    Cancelled,
    ClaimedRun,
    JobContext,
    NonRetryableError,
    Outcome,
    OutcomeStatus,
)
from app.handlers.shell import command_environment
from app.handlers.webhook import (
    RESPONSE_BODY_LIMIT,
    AddressRefused,
    Destinations,
    HttpCallFailed,
    call_url,
)
from tests.helpers.commands import REPO

_run_ids = itertools.count(1)
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy")


def context() -> JobContext:
    return JobContext(run_id=next(_run_ids), attempt=1, idempotency_key=None, fire_time=None)


def run_job(handler: str, model: str = "async", timeout: float = 10.0, **args: Any) -> Outcome:
    async def main() -> Outcome:
        executors = Executors(default_registry, thread_workers=2, process_workers=0)
        await executors.start()
        try:
            return await executors.run(ClaimedRun(next(_run_ids), 1, handler, args, model, timeout))
        finally:
            await executors.close(kill=True)

    return asyncio.run(main())


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
    assert set(BUILTINS) == {"noop", "sleep", "fail", "http", "shell"}
    assert set(BUILTINS) <= set(default_registry.names())


def test_a_default_worker_has_no_handler_that_kills_it() -> None:
    """`crash` is registered only where `SUNDIAL_HANDLERS` names app.handlers.chaos (a
    fresh interpreter: this one has loaded the test handler modules)."""
    code = (
        "import json; from app.services.worker import default_registry; "
        "print(json.dumps(default_registry.names()))"
    )
    names = json.loads(subprocess.run([sys.executable, "-c", code], check=True,
                                      capture_output=True, text=True, cwd=REPO).stdout)  # fmt: skip
    assert sorted(BUILTINS) == names
    load_modules(["app.handlers.chaos"])
    assert default_registry.get("crash").fn is crash


def test_load_modules_registers_their_handlers() -> None:
    load_modules(["tests.helpers.fixtures_handlers"])
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
    assert time.monotonic() - started >= 0.1


@pytest.mark.parametrize("seconds", [-1, "abc", True, float("nan"), None])
def test_sleep_refuses_bad_seconds(seconds: Any) -> None:
    with pytest.raises(NonRetryableError, match="argument 'seconds'"):
        asyncio.run(sleep(context(), seconds=seconds))


def test_sleep_stops_once_the_cancel_flag_is_set() -> None:
    ctx = context()
    threading.Timer(0.1, ctx.cancel_event.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        asyncio.run(sleep(ctx, seconds=60))
    assert time.monotonic() - started < 1  # woken by the flag, long before its end


def test_sleep_on_a_plain_event_still_stops_once_it_is_set() -> None:
    ctx = JobContext(1, 1, None, None, cancel_event=threading.Event())  # cannot wake it
    threading.Timer(0.1, ctx.cancel_event.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        asyncio.run(sleep(ctx, seconds=60))
    assert time.monotonic() - started < 1


def test_sleep_of_an_already_cancelled_run_stops_at_once() -> None:
    ctx = context()
    ctx.cancel_event.set()
    with pytest.raises(Cancelled):
        asyncio.run(sleep(ctx, seconds=60))
    asyncio.run(sleep(ctx, seconds=0))  # nothing to sleep: nothing to stop


def test_wait_cancelled_times_out_and_leaves_no_waker_behind() -> None:
    ctx = context()
    started = time.monotonic()
    assert asyncio.run(ctx.wait_cancelled(0.05)) is False
    assert time.monotonic() - started >= 0.05
    assert not ctx.cancel_event._wakers  # type: ignore[attr-defined]


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


# ---- shell (running commands needs the database: tests/db/test_handler_gate.py) ---------


def test_a_command_environment_keeps_only_base_variables_and_what_args_name() -> None:
    worker_env = {
        "PATH": "/usr/bin",
        "HOME": "/home/w",
        "DATABASE_URL": "postgresql://u:pw@db/app",
        "SECRET_KEY": "k",
        "SUNDIAL_HANDLERS": "myapp.jobs",
        "REPORT_BUCKET": "s3://reports",
        "OTHER": "x",
    }
    assert command_environment(None, None, worker_env) == {"PATH": "/usr/bin", "HOME": "/home/w"}
    assert command_environment({"A": "1"}, ["REPORT_BUCKET", "ABSENT"], worker_env) == {
        "PATH": "/usr/bin",
        "HOME": "/home/w",
        "REPORT_BUCKET": "s3://reports",
        "A": "1",
    }
    assert command_environment(None, None, {})["PATH"] == os.defpath
    with pytest.raises(NonRetryableError, match="cannot pass SECRET_KEY"):
        command_environment(None, ["SECRET_KEY"], worker_env)


# ---- http -------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    paths_seen: list[str]  # set per server, by the fixture
    released: threading.Event  # `/slow` answers only once the test is over

    def do_GET(self) -> None:
        self.paths_seen.append(self.path)
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/redirect?to="))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            self.released.wait(60)  # later than any client timeout, however slow the machine
        status, body = {
            "/ok": (200, "hello"),
            "/missing": (404, "no such page"),
            "/broken": (500, "server fell over"),
            "/big": (200, "é" * 5000),
            "/slow": (200, "late"),
        }.get(self.path, (404, "?"))
        self._answer(status, body.encode())

    def do_POST(self) -> None:
        self.paths_seen.append(self.path)
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


@dataclass
class LocalServer:
    port: int
    paths_seen: list[str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    """A local HTTP server on 127.0.0.1 (never any other address), with no allowlist set:
    the `http` handler must refuse it."""
    for name in (*PROXY_VARIABLES, "SUNDIAL_HTTP_ALLOW_HOSTS", "SUNDIAL_HTTP_ALLOW_NETWORKS"):
        monkeypatch.delenv(name, raising=False)
    paths_seen: list[str] = []
    released = threading.Event()
    handler = type("Recording", (_Handler,), {"paths_seen": paths_seen, "released": released})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield LocalServer(httpd.server_address[1], paths_seen)
    finally:
        released.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture
def server(local: LocalServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """The local server's base URL, with loopback allowed for the `http` handler."""
    monkeypatch.setenv("SUNDIAL_HTTP_ALLOW_NETWORKS", "127.0.0.0/8")
    return local.url


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


# ---- http: where requests may go --------------------------------------------------------


def test_http_refuses_loopback_by_default_in_every_spelling(local: LocalServer) -> None:
    port = local.port
    for url in (
        f"{local.url}/ok",
        f"http://localhost:{port}/ok",
        f"http://0x7f000001:{port}/ok",
        f"http://2130706433:{port}/ok",
        f"http://127.1:{port}/ok",
        f"http://017700000001:{port}/ok",
        f"http://[::1]:{port}/ok",
        f"http://[::ffff:127.0.0.1]:{port}/ok",
        f"http://0.0.0.0:{port}/ok",
        f"https://127.0.0.1:{port}/ok",
    ):
        with pytest.raises(AddressRefused, match="is not a public address") as caught:
            call(url=url)
        assert "SUNDIAL_HTTP_ALLOW_NETWORKS" in str(caught.value), url
    outcome = run_job("http", url=f"{local.url}/ok")
    assert outcome.status is OutcomeStatus.FAILED and not outcome.retryable
    assert outcome.error is not None and f"GET {local.url}/ok refused: 127.0.0.1 is not" in (
        outcome.error
    )
    assert local.paths_seen == []


def test_http_allowlists_networks_or_host_names(
    local: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUNDIAL_HTTP_ALLOW_NETWORKS", "10.0.0.0/8, 127.0.0.0/8")
    assert call(url=f"{local.url}/ok") == {"status": 200, "body": "hello"}
    monkeypatch.delenv("SUNDIAL_HTTP_ALLOW_NETWORKS")
    monkeypatch.setenv("SUNDIAL_HTTP_ALLOW_HOSTS", "LocalHost")
    assert call(url=f"http://localhost:{local.port}/ok")["status"] == 200
    with pytest.raises(AddressRefused):  # the name is allowed, not its addresses
        call(url=f"{local.url}/ok")
    assert local.paths_seen == ["/ok", "/ok"]


def test_http_checks_every_redirect_hop(
    local: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUNDIAL_HTTP_ALLOW_HOSTS", "127.0.0.1")
    assert call(url=f"{local.url}/redirect?to=/ok")["status"] == 200  # same host: allowed
    with pytest.raises(AddressRefused, match=re.escape("localhost (at 127.0.0.1) is not a public")):
        call(url=f"{local.url}/redirect?to=http://localhost:{local.port}/ok")
    with pytest.raises(NonRetryableError, match=re.escape("redirected to a non-http(s) URL")):
        call(url=f"{local.url}/redirect?to=ftp://127.0.0.1:{local.port}/ok")
    assert local.paths_seen == [
        "/redirect?to=/ok",
        "/ok",
        f"/redirect?to=http://localhost:{local.port}/ok",
        f"/redirect?to=ftp://127.0.0.1:{local.port}/ok",
    ]


def test_http_connects_to_the_addresses_it_checked(
    local: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name is resolved once per hop and the socket goes to exactly those addresses: a
    second lookup (which DNS rebinding would answer differently) never happens."""
    monkeypatch.setenv("SUNDIAL_HTTP_ALLOW_NETWORKS", "127.0.0.1/32")
    real_getaddrinfo = socket.getaddrinfo
    lookups: list[str] = []

    def resolver(host: str, *args: Any, **kwargs: Any) -> Any:
        lookups.append(host)
        return real_getaddrinfo("127.0.0.1" if host == "hooks.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    assert call(url=f"http://hooks.test:{local.port}/ok")["status"] == 200
    assert lookups == ["hooks.test"]


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "fd00::1",
        "fe80::1",
        "ff02::1",
        "2002:7f00:1::1",  # 6to4 around 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 around 169.254.169.254
        "::127.0.0.1",  # IPv4-compatible
    ],
)
def test_private_and_special_addresses_are_refused(address: str) -> None:
    assert Destinations().refusal("h", ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::1", "::ffff:8.8.8.8"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert Destinations().refusal("h", ipaddress.ip_address(address)) is None


def test_allowlisted_networks_cover_mapped_addresses() -> None:
    allowed = Destinations(networks=(ipaddress.ip_network("169.254.0.0/16"),))
    assert allowed.refusal("h", ipaddress.ip_address("::ffff:169.254.169.254")) is None
    assert allowed.refusal("h", ipaddress.ip_address("127.0.0.1")) is not None
