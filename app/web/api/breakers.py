"""Circuit breakers over the API: list them, set one's settings, open or close one by hand —
through `app.runs.breakers`, the functions the CLI and the Queues page call."""

from __future__ import annotations

from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people.roles import Role
from app.runs import breakers
from app.runs.breakers import UnknownDependency
from app.web.api.core import PREFIX, ApiCall, json_response, operation
from app.web.api.schemas import BreakerListOut, BreakerNoteIn, BreakerOut, BreakerSettingsIn
from app.web.database import call


def _one(conn: Conn, name: str) -> BreakerOut:
    found = [b for b in breakers.overview(conn) if b.name == name]
    if not found:
        raise UnknownDependency(f"no job names a dependency called {name!r}", "dependency")
    return BreakerOut.model_validate(found[0].model_dump())


@operation(Role.VIEWER, "List the circuit breakers of the services jobs call",
           response=BreakerListOut)  # fmt: skip
async def index(api: ApiCall) -> Response:
    rows = await call(api.request, breakers.overview)
    return json_response(
        BreakerListOut(breakers=[BreakerOut.model_validate(r.model_dump()) for r in rows])
    )


@operation(Role.OPERATOR, "Set a service's circuit breaker and retry budget",
           path={"name": str}, body=BreakerSettingsIn, response=BreakerOut)  # fmt: skip
async def set_settings(api: ApiCall) -> Response:
    name, body = api.path["name"], api.body

    def do(conn: Conn) -> BreakerOut:
        breakers.set_settings(conn, name, actor=api.actor, **body.model_dump())
        return _one(conn, name)

    return json_response(await call(api.request, do))


@operation(Role.OPERATOR, "Open a service's breaker by hand: its runs wait until it is closed",
           path={"name": str}, body=BreakerNoteIn, response=BreakerOut,
           also=(404,))  # fmt: skip
async def open_breaker(api: ApiCall) -> Response:
    name, note = api.path["name"], api.body.note

    def do(conn: Conn) -> BreakerOut:
        breakers.open_by_hand(conn, name, actor=api.actor, note=note)
        return _one(conn, name)

    return json_response(await call(api.request, do))


@operation(Role.OPERATOR, "Close a service's breaker: its runs go again",
           path={"name": str}, body=BreakerNoteIn, response=BreakerOut,
           also=(404,))  # fmt: skip
async def close_breaker(api: ApiCall) -> Response:
    name, note = api.path["name"], api.body.note

    def do(conn: Conn) -> BreakerOut:
        breakers.close_by_hand(conn, name, actor=api.actor, note=note)
        return _one(conn, name)

    return json_response(await call(api.request, do))


routes = [
    Route(f"{PREFIX}/breakers", index, methods=["GET"], name="api_breakers_index"),
    Route(f"{PREFIX}/breakers/{{name}}", set_settings, methods=["PUT"],
          name="api_breakers_settings"),
    Route(f"{PREFIX}/breakers/{{name}}/open", open_breaker, methods=["POST"],
          name="api_breakers_open"),
    Route(f"{PREFIX}/breakers/{{name}}/close", close_breaker, methods=["POST"],
          name="api_breakers_close"),
]  # fmt: skip
