"""API tokens page (admins): create a token for a user (its secret shown once), list
tokens with their last use, revoke — through `app.people.tokens`, as `sundial token` does."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people import tokens
from app.people.roles import Role, TokenScope
from app.people.tokens import TokenError
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import redirect, render

LIFETIMES = [("30d", "30 days"), ("90d", "90 days"), ("365d", "1 year"), ("", "Never expires")]
FIELDS = ("user", "name", "scope", "lifetime")


def _page(conn: Conn) -> dict[str, Any]:
    return {
        "tokens": tokens.list_all(conn),
        "users": tokens.user_choices(conn),
        "scopes": [s.value for s in TokenScope],
        "lifetimes": LIFETIMES,
    }


def _blank() -> dict[str, str]:
    return {"user": "", "name": "", "scope": TokenScope.READ.value, "lifetime": "30d"}


@requires(Role.ADMIN)
async def index(request: Request) -> Response:
    page = await call(request, _page)
    return render(request, "tokens/index.html", values=_blank(), errors={}, **page)


@requires(Role.ADMIN)
async def create(request: Request) -> Response:
    form = await request.form()
    values = {f: str(form.get(f, "")).strip() for f in FIELDS}
    actor = current_user(request).username
    try:
        lifetime = tokens.parse_lifetime(values["lifetime"]) if values["lifetime"] else None
        made = await call(
            request, tokens.create, values["user"], values["scope"],
            name=values["name"], actor=actor, lifetime=lifetime,
        )  # fmt: skip
    except TokenError as exc:
        page = await call(request, _page)
        return render(
            request, "tokens/index.html", "tokens/_form.html", status_code=422,
            values=values, errors=field_errors(exc), **page,
        )  # fmt: skip
    page = await call(request, _page)
    # Rendered, not redirected: the secret exists only in this response.
    return render(
        request, "tokens/index.html", values=_blank(), errors={}, created=made,
        created_for=values["user"], **page,
    )  # fmt: skip


@requires(Role.ADMIN)
async def revoke(request: Request) -> Response:
    """Revoke a token. htmx gets the token's row as it is now and a message, so the list
    stays where it was; a plain form post goes back to the list."""
    token_id = request.path_params["token_id"]
    try:
        await call(request, tokens.revoke, token_id, actor=current_user(request).username)
        message, kind = "Token revoked: programs using it are refused from now on.", "info"
    except TokenError as exc:  # already revoked or gone: the row shows it as it is
        message, kind = f"Not revoked: {exc}.", "warn"
    if request.headers.get("HX-Request") != "true":
        return redirect(request, "/tokens")
    row = await call(request, tokens.row_of, token_id)
    if row is None:
        return redirect(request, "/tokens")
    return render(request, "tokens/_revoked.html", token=row, message=message, kind=kind)


routes = [
    Route("/tokens", index, methods=["GET"], name="tokens_index"),
    Route("/tokens", create, methods=["POST"], name="tokens_create"),
    Route("/tokens/{token_id:int}/revoke", revoke, methods=["POST"], name="tokens_revoke"),
]
