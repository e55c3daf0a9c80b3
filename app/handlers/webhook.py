"""The `http` built-in: call a URL (a webhook) with the standard library.

It is a plain (blocking) function, so under the `async` model the executors run it on
their thread pool, where it holds one worker slot and never blocks the event loop.

A 4xx answer fails the run without retries (the request itself is wrong); a 5xx answer,
a timeout or a connection error fails the attempt and the run is retried.
"""

from __future__ import annotations

import json as jsonlib
import urllib.error
import urllib.request
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

from app.handlers.args import number, optional_string, string_map
from app.jobs import JobContext, NonRetryableError

DEFAULT_HTTP_TIMEOUT_SECONDS = 30.0
RESPONSE_BODY_LIMIT = 2048  # bytes of the response body kept in the run's result
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class HttpCallFailed(RuntimeError):
    """The server answered 5xx or could not be reached; worth another attempt."""


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
    status, text = _send(request, seconds)
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


def _send(request: urllib.request.Request, timeout: float) -> tuple[int, str]:
    """Blocking: the status code and the start of the body, for any status."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, _read_text(response, response.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _read_text(exc, exc.headers)
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
