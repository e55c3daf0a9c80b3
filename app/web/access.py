"""Who is signed in, and what their role lets them do — checked on every route.

Each handler is wrapped by `requires(role)` (or marked `public`): the wrapper loads the
session's user, sends a person who is not signed in to the sign-in page, and answers 403
with a page when the role is too low. `tests/web/test_access.py` checks that every route
declares one or the other.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from app.core.errors import NotAllowed
from app.handlers.gate import may_run_commands
from app.people import users
from app.people.roles import Role
from app.people.users import User
from app.web.database import call
from app.web.render import render
from app.web.security import SESSION_COOKIE

Endpoint = Callable[[Request], Awaitable[Response]]
ROLE_ATTRIBUTE = "required_role"


def public(endpoint: Endpoint) -> Endpoint:
    """Open to everyone (sign-in page, health check)."""
    setattr(endpoint, ROLE_ATTRIBUTE, None)
    return endpoint


async def load_user(request: Request) -> User | None:
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    return await call(request, users.session_user, token, request.app.state.settings.secret_key)


def requires(role: Role) -> Callable[[Endpoint], Endpoint]:
    def wrap(endpoint: Endpoint) -> Endpoint:
        @functools.wraps(endpoint)
        async def guarded(request: Request) -> Response:
            user = await load_user(request)
            request.state.user = user
            if user is None:
                return _to_sign_in(request)
            if not user.may(role):
                return _forbidden(request, needed=role.value)
            may_run_commands.set(user.may(Role.ADMIN))
            try:
                return await endpoint(request)
            except NotAllowed as exc:
                return _forbidden(request, reason=str(exc))

        setattr(guarded, ROLE_ATTRIBUTE, role)
        return guarded

    return wrap


def _forbidden(request: Request, *, needed: str = "", reason: str = "") -> Response:
    """The refusal page; a button of a page (htmx) shows it in place of the page, so the
    person reads why instead of seeing nothing happen."""
    response = render(
        request, "shared/forbidden.html", status_code=403, needed=needed, reason=reason
    )
    if request.headers.get("HX-Request") == "true":
        response.headers["HX-Retarget"] = "body"
        response.headers["HX-Reswap"] = "innerHTML"
    return response


def _to_sign_in(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    location = f"/login?next={quote(target, safe='')}"
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=401, headers={"HX-Redirect": location})
    if request.method != "GET":
        return Response("Sign in first.", status_code=401, media_type="text/plain")
    return RedirectResponse(location, status_code=303)


def current_user(request: Request) -> User:
    """The user `requires` loaded (handlers behind `requires` only)."""
    user: User = request.state.user
    return user
