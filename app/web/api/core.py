"""What every JSON API handler shares: bearer authentication, the role and scope check,
reading and validating the body and query (pydantic), and errors as JSON.

A handler is declared once with `operation(...)`; the same declaration drives the check
of each request and the OpenAPI document (`app.web.api.openapi`), so the document cannot
describe a different rule from the one enforced.

    @operation(Role.OPERATOR, "Cancel a run", path={"run_id": int}, response=RunOut)
    async def cancel(call: ApiCall) -> Response: ...

Errors are `{"error": {"message": ..., "field": ...}}` with a 4xx status: 401 no or bad
token, 403 role or scope too low, 404, 409, 413 body too large, 422 invalid input.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.core.errors import Conflict, Missing, NotAllowed, UsageError
from app.handlers.gate import may_run_commands
from app.people import tokens
from app.people.roles import Role
from app.people.tokens import Principal
from app.web.access import ROLE_ATTRIBUTE
from app.web.database import call
from app.web.security import SAFE_METHODS

log = logging.getLogger(__name__)

PREFIX = "/api/v1"
MAX_BODY_BYTES = 1024 * 1024  # a batch of runs with large args still fits; see docs/api.md
# An oversize body up to this size is read to its end (and dropped) before the 413, so a
# client that sends its whole body before reading the answer gets the answer, not a reset
# connection; a larger one is refused at once and the connection closed.
DRAIN_BYTES = 16 * MAX_BODY_BYTES


class ApiError(Exception):
    """An answer other than success: status, a sentence for a person, the field at fault."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field

    def response(self) -> Response:
        return error_response(self.status, self.message, self.field)


def error_response(status: int, message: str, field: str | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="sundial"'} if status == 401 else None
    return JSONResponse(
        {"error": {"message": message, "field": field}}, status_code=status, headers=headers
    )


@dataclass(frozen=True, slots=True)
class Operation:
    """One endpoint as the OpenAPI document describes it."""

    role: Role
    summary: str
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    path: Mapping[str, type] = field(default_factory=dict)
    also: tuple[int, ...] = ()  # other statuses it may answer with (409, 202, ...)
    description: str = ""


@dataclass(frozen=True, slots=True)
class ApiCall:
    """A request that passed authentication and validation."""

    request: Request
    principal: Principal
    body: Any
    query: Any
    path: dict[str, Any]

    @property
    def actor(self) -> str:
        """How the audit log names who did it: the token's user, through the API."""
        return f"{self.principal.user.username} (api token {self.principal.token_id})"


ApiHandler = Callable[[ApiCall], Awaitable[Response]]
OPERATION_ATTRIBUTE = "api_operation"


def operation(
    role: Role,
    summary: str,
    *,
    body: type[BaseModel] | None = None,
    query: type[BaseModel] | None = None,
    response: type[BaseModel] | None = None,
    status: int = 200,
    path: Mapping[str, type] | None = None,
    also: tuple[int, ...] = (),
    description: str = "",
) -> Callable[[ApiHandler], Callable[[Request], Awaitable[Response]]]:
    spec = Operation(
        role, summary, body, query, response, status, dict(path or {}), also, description
    )

    def wrap(handler: ApiHandler) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            try:
                principal = await authenticate(request)
                writes = request.method not in SAFE_METHODS
                if not principal.may(role, writes=writes):
                    return _forbidden(principal, role, writes)
                may_run_commands.set(principal.user.may(Role.ADMIN))
                path_values = _path_values(request, spec.path)
                query_value = _validate(spec.query, dict(request.query_params), "query")
                body_value = _validate(spec.body, await read_json(request), "body")
                return await handler(
                    ApiCall(request, principal, body_value, query_value, path_values)
                )
            except ApiError as exc:
                return exc.response()
            except UsageError as exc:
                return error_response(_usage_status(exc), str(exc), exc.field)
            except NotAllowed as exc:
                return error_response(403, str(exc), "handler")
            except (PoolTimeout, psycopg.OperationalError) as exc:
                log.error("database unavailable for %s: %s", request.url.path, exc)
                return error_response(503, "the database cannot be reached; try again soon")

        setattr(endpoint, ROLE_ATTRIBUTE, role)
        setattr(endpoint, OPERATION_ATTRIBUTE, spec)
        return endpoint

    return wrap


def _usage_status(exc: UsageError) -> int:
    """404 for a name of nothing stored, 409 for a clash with what is, else 422."""
    return 404 if isinstance(exc, Missing) else 409 if isinstance(exc, Conflict) else 422


async def authenticate(request: Request) -> Principal:
    """The principal of the request's bearer token; cookies are never read here, which is
    why the CSRF middleware can let bearer requests through."""
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if not header or scheme.lower() != "bearer":
        raise ApiError(401, "send an API token: Authorization: Bearer <token>")
    try:
        return await call(request, tokens.authenticate, secret.strip())
    except tokens.Refused as exc:
        raise ApiError(401, exc.reason) from None


def _forbidden(principal: Principal, role: Role, writes: bool) -> Response:
    if not principal.user.may(role):
        return error_response(
            403, f"this needs the {role.value} role; the token's user is {principal.user.role}"
        )
    return error_response(403, "this token has the read scope: it cannot change anything")


def _path_values(request: Request, types: Mapping[str, type]) -> dict[str, Any]:
    """Path parameters as their declared types; one that cannot name anything is a 404
    (or 422 when it is not even of the right kind)."""
    values: dict[str, Any] = dict(request.path_params)
    for name, kind in types.items():
        text = str(values[name])
        if kind is int:
            if not text.isascii() or not text.isdigit():
                raise ApiError(422, f"{name} must be a whole number", name)
            values[name] = int(text)
            if not 1 <= values[name] < 2**63:
                raise ApiError(404, f"there is nothing with {name} {text}")
        elif kind is uuid.UUID:
            try:
                values[name] = uuid.UUID(text)
            except ValueError:
                raise ApiError(422, f"{name} must be a UUID", name) from None
    return values


NO_BODY: Any = object()  # what read_json returns for an empty body (JSON `null` is None)


async def read_json(request: Request) -> Any:
    """The request's JSON body (NO_BODY when empty); 413 beyond MAX_BODY_BYTES, read in
    chunks so an oversize body is refused without holding it."""
    declared = request.headers.get("content-length", "")
    too_large = ApiError(413, f"the request body may be at most {MAX_BODY_BYTES:,} bytes")
    if declared.isdigit() and int(declared) > DRAIN_BYTES:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > DRAIN_BYTES:
            raise too_large
        if size <= MAX_BODY_BYTES:
            chunks.append(chunk)
    if size > MAX_BODY_BYTES:
        raise too_large
    raw = b"".join(chunks)
    if not raw:  # whitespace alone is a body, and not JSON
        return NO_BODY
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise ApiError(
            415,
            f"the request body must be JSON sent with Content-Type: application/json, not "
            f"{media_type or 'no Content-Type'}",
            "body",
        )
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}", "body") from None
    except RecursionError:
        value = None  # nested past Python's own limit: refused just below
    if value is None or _depth(value) > MAX_JSON_DEPTH:
        if value is None and raw.strip() == b"null":
            return None
        raise ApiError(400, f"the request body nests deeper than {MAX_JSON_DEPTH} levels", "body")
    return value


MAX_JSON_DEPTH = 32  # objects and lists within each other; real bodies use a handful


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any) -> int:
    """How deeply objects and lists nest in `value` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, level)
        if level <= MAX_JSON_DEPTH:
            stack.extend((child, level + 1) for child in children)
    return deepest


def _validate(model: type[BaseModel] | None, value: Any, where: str) -> Any:
    if model is None:
        if where == "body" and value is not NO_BODY:
            raise ApiError(422, "this request takes no body", "body")
        return None
    if value is NO_BODY:  # as the document says: a body of optional fields may be left out
        value = {}
    try:
        if where == "body":
            # JSON's own types, strictly: no `true` or "5" or 5.0 where a whole number is
            # expected (a query string's values are all text, read as the schema says).
            return model.model_validate_json(json.dumps(value), strict=True)
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"])
        name = location or where
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = f"unknown field {name!r}"
        elif first["type"] == "missing":
            message = f"{name} is required"
        else:
            message = f"{name}: {message}"
        raise ApiError(422, message, name) from None


def json_response(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")
