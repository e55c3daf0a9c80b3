"""The `http` built-in: call a URL (a webhook) with the standard library.

It is a plain (blocking) function, so under the `async` model the executors run it on
their thread pool, where it holds one worker slot and never blocks the event loop.

A 4xx answer fails the run without retries (the request itself is wrong); a 5xx answer,
a timeout or a connection error fails the attempt and the run is retried.

Job arguments come from people and systems outside the worker's network, so the handler
connects only to public addresses: loopback, private, link-local (cloud metadata at
169.254.169.254), carrier-grade NAT, multicast and reserved addresses are refused, in
any spelling (`0x7f000001`, `2130706433`, `127.1`, `::ffff:127.0.0.1`, 6to4, NAT64). The
check runs on every hop of a redirect and on the very addresses the socket connects to,
after resolving the name once, so a name that resolves differently the second time (DNS
rebinding) cannot slip past it. `SUNDIAL_HTTP_ALLOW_HOSTS` (names) and
`SUNDIAL_HTTP_ALLOW_NETWORKS` (CIDRs) let an operator open chosen internal targets. Proxy
variables (`http_proxy`, …) are ignored: through a proxy the check could not see where a
request goes.
"""

from __future__ import annotations

import http.client
import ipaddress
import json as jsonlib
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from functools import cache, partial
from typing import Any
from urllib.parse import urlsplit

from app.core.config import IPNetwork, Settings
from app.handlers.args import number, optional_string, string_map
from app.handlers.jobs import JobContext, NonRetryableError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")

DEFAULT_HTTP_TIMEOUT_SECONDS = 30.0
RESPONSE_BODY_LIMIT = 2048  # bytes of the response body kept in the run's result
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class HttpCallFailed(RuntimeError):
    """The server answered 5xx or could not be reached; worth another attempt."""


class AddressRefused(NonRetryableError):
    """The request would reach an address the worker's network keeps to itself."""


@dataclass(frozen=True, slots=True)
class Destinations:
    """Where requests may go besides public addresses: allowlisted names and networks."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> Destinations:
        return cls(frozenset(settings.http_allow_hosts), settings.http_allow_networks)

    def refusal(self, host: str, address: IPAddress) -> str | None:
        """Why `host` may not be reached at `address`, or None when it may."""
        if host.lower().rstrip(".") in self.hosts:
            return None
        embedded = _embedded_ipv4(address)
        if any(ip in net for ip in (address, embedded) if ip is not None for net in self.networks):
            return None
        checked = embedded or address
        if checked.is_global and not checked.is_multicast:
            return None
        where = str(address) if host == str(address) else f"{host} (at {address})"
        return (
            f"{where} is not a public address (loopback, private, link-local or reserved); "
            f"allow it with SUNDIAL_HTTP_ALLOW_NETWORKS or SUNDIAL_HTTP_ALLOW_HOSTS"
        )


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, Teredo, NAT64, compatible)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in NAT64_PREFIX or (address in IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def open_checked_socket(
    host: str,
    port: int,
    timeout: float | None,
    source_address: tuple[str, int] | None,
    destinations: Destinations,
) -> socket.socket:
    """Resolve `host` once, refuse it if any address is not allowed, then connect to
    those very addresses (like `socket.create_connection`, which would resolve again)."""
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve {host}: {exc}") from exc
    for *_, sockaddr in infos:
        reason = destinations.refusal(host, ipaddress.ip_address(sockaddr[0]))
        if reason is not None:
            raise AddressRefused(reason)
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            if isinstance(timeout, int | float):  # else http.client's "use the default"
                sock.settimeout(timeout)
            if source_address is not None:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"cannot connect to {host}")


class _CheckedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, destinations: Destinations, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        # http.client opens its socket through this attribute (set in __init__).
        self._create_connection = _checked_connector(destinations)


class _CheckedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, *, destinations: Destinations, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._create_connection = _checked_connector(destinations)


def _checked_connector(destinations: Destinations) -> Callable[..., socket.socket]:
    """A stand-in for `socket.create_connection` that checks where it connects."""

    def connect(
        address: tuple[str, int],
        timeout: float | None = None,
        source_address: tuple[str, int] | None = None,
    ) -> socket.socket:
        host, port = address
        return open_checked_socket(host, port, timeout, source_address, destinations)

    return connect


class _CheckedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, destinations: Destinations) -> None:
        super().__init__()
        self.destinations = destinations

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(partial(_CheckedHTTPConnection, destinations=self.destinations), req)


class _CheckedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, destinations: Destinations) -> None:
        super().__init__()
        self.destinations = destinations
        self.ssl_context = _ssl_context()

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = partial(
            _CheckedHTTPSConnection, destinations=self.destinations, context=self.ssl_context
        )
        return self.do_open(connection, req)


@cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per process: loading the CA store costs more than a request."""
    return ssl.create_default_context()


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects to http(s) URLs only (urllib would also follow ftp://)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urlsplit(newurl).scheme not in ("http", "https"):
            raise NonRetryableError(f"{req.full_url} redirected to a non-http(s) URL: {newurl}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def checked_opener(destinations: Destinations) -> urllib.request.OpenerDirector:
    """An opener that speaks http(s) only, without proxies, to allowed addresses only."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        _CheckedHTTPHandler(destinations),
        _CheckedHTTPSHandler(destinations),
        _HttpOnlyRedirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
        urllib.request.UnknownHandler(),
    ):
        opener.add_handler(handler)
    return opener


def call_url(
    ctx: JobContext,
    url: Any = None,
    method: Any = "GET",
    headers: Any = None,
    json: Any = None,
    body: Any = None,
    timeout: Any = DEFAULT_HTTP_TIMEOUT_SECONDS,
    expect_status: Any = None,
) -> dict[str, Any]:
    """Send one request; return `{"status": code, "body": first 2 KB of the body as text}`.

    `json` (any JSON value) or `body` (a string) is the request body. With
    `expect_status` (a list of codes) exactly those codes succeed; otherwise 2xx and 3xx.
    """
    request = _build_request(url, method, headers, json, body)
    seconds = number("timeout", timeout, minimum=0.001)
    expected = _expected_statuses(expect_status)
    destinations = Destinations.from_settings(Settings.from_env())
    status, text = _send(checked_opener(destinations), request, seconds)
    ok = status in expected if expected is not None else status < 400
    if not ok:
        message = f"{request.get_method()} {request.full_url} answered {status}: {text[:200]}"
        if status >= 500:
            raise HttpCallFailed(message)
        raise NonRetryableError(message)
    return {"status": status, "body": text}


def _build_request(
    url: Any, method: Any, headers: Any, json: Any, body: Any
) -> urllib.request.Request:
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        raise NonRetryableError(f"argument 'url' must be an http(s) URL, got {url!r}")
    verb = (optional_string("method", method) or "GET").upper()
    if verb not in METHODS:
        raise NonRetryableError(f"argument 'method' must be one of {', '.join(METHODS)}")
    header_map = string_map("headers", headers)
    if json is not None and body is not None:
        raise NonRetryableError("give either argument 'json' or 'body', not both")
    data: bytes | None = None
    if json is not None:
        data = jsonlib.dumps(json).encode()
        header_map.setdefault("Content-Type", "application/json")
    elif body is not None:
        data = (optional_string("body", body) or "").encode()
    return urllib.request.Request(url, data=data, headers=header_map, method=verb)


def _expected_statuses(value: Any) -> frozenset[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise NonRetryableError(f"argument 'expect_status' must be a list of codes, got {value!r}")
    return frozenset(value)


def _send(
    opener: urllib.request.OpenerDirector, request: urllib.request.Request, timeout: float
) -> tuple[int, str]:
    """Blocking: the status code and the start of the body, for any status."""
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, _read_text(response, response.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _read_text(exc, exc.headers)
    except AddressRefused as exc:
        raise AddressRefused(f"{request.get_method()} {request.full_url} refused: {exc}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HttpCallFailed(f"{request.get_method()} {request.full_url} failed: {reason}") from exc


def _read_text(stream: Any, headers: Message | None) -> str:
    raw: bytes = stream.read(RESPONSE_BODY_LIMIT) or b""
    charset = (headers.get_content_charset() if headers is not None else None) or "utf-8"
    try:
        return raw.decode(charset, errors="replace")
    except LookupError:  # a charset Python does not know
        return raw.decode("utf-8", errors="replace")
