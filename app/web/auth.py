"""Sign in (password or one-time link) and sign out."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from app.people import users
from app.people.roles import Role
from app.people.users import TooManyAttempts, User
from app.web.access import public, requires
from app.web.database import call
from app.web.render import render
from app.web.security import SESSION_COOKIE, is_https


def _safe_next(target: str | None) -> str:
    """Only a path on this site (never `//elsewhere`, `/\\elsewhere` or a full URL)."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


async def _start(request: Request, user: User, target: str) -> Response:
    secret = request.app.state.settings.secret_key
    token = await call(request, users.start_session, user, secret)
    response = RedirectResponse(_safe_next(target), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=users.SESSION_LIFETIME_SECONDS,
        httponly=True,
        samesite="lax",
        secure=is_https(request.scope),
    )
    return response


@public
async def login_form(request: Request) -> Response:
    return render(request, "auth/login.html", next=_safe_next(request.query_params.get("next")))


@public
async def login(request: Request) -> Response:
    form = await request.form()
    username = str(form.get("username", "")).strip()
    password = str(form.get("password", ""))
    target = _safe_next(str(form.get("next", "/")))
    address = request.client.host if request.client else "unknown"
    try:
        user = await call(request, users.sign_in, username, password, address=address)
    except TooManyAttempts as exc:
        return render(
            request,
            "auth/login.html",
            status_code=429,
            error=str(exc),
            next=target,
            username=username,
        )
    if user is None:
        return render(
            request,
            "auth/login.html",
            status_code=401,
            next=target,
            username=username,
            error="That user name and password do not match.",
        )
    return await _start(request, user, target)


@public
async def login_link(request: Request) -> Response:
    token = request.query_params.get("token", "")
    secret = request.app.state.settings.secret_key
    user = await call(request, users.use_sign_in_link, token, secret) if token else None
    if user is None:
        return render(
            request,
            "auth/login.html",
            status_code=400,
            next="/",
            error="This sign-in link was already used or has expired. Sign in with a password.",
        )
    return await _start(request, user, "/")


@requires(Role.VIEWER)
async def logout(request: Request) -> Response:
    secret = request.app.state.settings.secret_key
    await call(request, users.end_session, request.cookies.get(SESSION_COOKIE, ""), secret)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="lax")
    return response


routes = [
    Route("/login", login_form, methods=["GET"], name="login"),
    Route("/login", login, methods=["POST"], name="login_post"),
    Route("/login/link", login_link, methods=["GET"], name="login_link"),
    Route("/logout", logout, methods=["POST"], name="logout"),
]
