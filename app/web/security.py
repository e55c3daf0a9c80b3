"""Security middleware: CSRF protection on every unsafe request, and security headers.

CSRF uses a signed double-submit token: the browser holds a random `sundial_csrf` cookie
(HttpOnly, SameSite=Lax) and every unsafe request must carry
HMAC(SECRET_KEY, cookie | session cookie) — as the `csrf_token` form field, or the
`X-CSRF-Token` header that `hx-headers` on <body> adds to every htmx request. A page of
another site can neither read the cookie nor compute the token. The token is bound to the
session cookie, so signing in gives a new one.

JSON API requests (`/api/v1/...`) authenticate with a bearer token only, never a cookie, so
one that carries a bearer token, or no session cookie at all, needs no CSRF token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSRF_COOKIE = "sundial_csrf"
SESSION_COOKIE = "sundial_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_FORM_BYTES = 1024 * 1024
API_PREFIX = "/api/v1/"

# Scripts and styles come from this origin only: no inline script, no eval.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    # none of the pages uses these browser features; no script may ask for them
    "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=(), "
    "interest-cohort=()",
}
HSTS = "max-age=31536000; includeSubDomains"  # sent only over https: a year of https only

REFUSED_PAGE = (
    b"<!doctype html><html lang=en><meta charset=utf-8><title>Refused</title>"
    b"<h1>This request was refused</h1><p>It did not carry this page's security token "
    b"(the form may be older than your sign-in). Go back, reload the page and try again.</p>"
)


def csrf_token(secret_key: str, csrf_seed: str, session_token: str) -> str:
    message = f"{csrf_seed}|{session_token}".encode()
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()


def request_csrf_token(conn: HTTPConnection) -> str:
    """The token the pages of this request embed in forms and in `hx-headers`."""
    return csrf_token(
        conn.app.state.settings.secret_key,
        conn.scope["state"]["csrf_seed"],
        conn.cookies.get(SESSION_COOKIE, ""),
    )


def is_https(scope: Scope) -> bool:
    return scope.get("scheme") == "https"


class SecurityMiddleware:
    """Adds the security headers to every response; refuses unsafe requests without a
    valid CSRF token (403, nothing done); gives new browsers their CSRF cookie."""

    def __init__(self, app: ASGIApp, secret_key: str) -> None:
        self.app = app
        self.secret_key = secret_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cookies = _cookies(scope)
        signed_in = SESSION_COOKIE in cookies or bool(_header(scope, "authorization"))
        seed = cookies.get(CSRF_COOKIE) or ""
        new_seed = not seed
        if new_seed:
            seed = secrets.token_urlsafe(24)
        scope.setdefault("state", {})["csrf_seed"] = seed

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
                if is_https(scope):
                    headers.setdefault("strict-transport-security", HSTS)
                if signed_in and not scope["path"].startswith("/static/"):
                    # a signed-in page must not outlive the session in a shared cache or
                    # the back button after sign-out
                    headers["cache-control"] = "no-store"
                if new_seed:
                    secure = "; Secure" if is_https(scope) else ""
                    headers.append(
                        "set-cookie",
                        f"{CSRF_COOKIE}={seed}; Path=/; HttpOnly; SameSite=Lax{secure}",
                    )
            await send(message)

        if scope["method"] in SAFE_METHODS or _api_without_ambient_credentials(scope, cookies):
            await self.app(scope, receive, send_with_headers)
            return
        body = await _read_body(receive)
        expected = csrf_token(self.secret_key, seed, cookies.get(SESSION_COOKIE, ""))
        given = _header(scope, CSRF_HEADER) or _form_field(scope, body, CSRF_FIELD)
        if new_seed or body is None or not hmac.compare_digest(given, expected):
            await _refuse(send_with_headers)
            return
        await self.app(scope, _replay(body, receive), send_with_headers)


def _api_without_ambient_credentials(scope: Scope, cookies: dict[str, str]) -> bool:
    """A JSON API request that a browser could not have been tricked into authenticating:
    the API reads only a bearer token, which a page of another site cannot add. A request
    that carries a session cookie and no bearer token still needs the CSRF token."""
    if not scope["path"].startswith(API_PREFIX):
        return False
    bearer = _header(scope, "authorization")[:7].lower() == "bearer "
    return bearer or SESSION_COOKIE not in cookies


def _cookies(scope: Scope) -> dict[str, str]:
    raw = _header(scope, "cookie")
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed cookie header is the same as none
        return {}
    return {key: morsel.value for key, morsel in jar.items()}


def _header(scope: Scope, name: str) -> str:
    for key, value in scope["headers"]:
        if key.decode("latin-1") == name:
            return str(value.decode("latin-1"))
    return ""


def _form_field(scope: Scope, body: bytes | None, name: str) -> str:
    content_type = _header(scope, "content-type").split(";")[0].strip()
    if body is None or content_type != "application/x-www-form-urlencoded":
        return ""
    values = parse_qs(body.decode("utf-8", "replace")).get(name)
    return values[0] if values else ""


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when it is larger than a form can be."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive_more: Receive) -> Receive:
    """The body read for the check, then whatever the connection says next (disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive_more()

    return receive


async def _refuse(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [(b"content-type", b"text/html; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": REFUSED_PAGE})
