"""Named queues over the API: list them, pause and resume one, set its limits — through
`app.runs.queues`, the functions the CLI and the Queues page call."""

from __future__ import annotations

from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people.roles import Role
from app.runs import queues
from app.web.api.core import PREFIX, ApiCall, json_response, operation
from app.web.api.schemas import QueueLimitsIn, QueueListOut, QueueOut, QueuePauseIn
from app.web.database import call


def _one(conn: Conn, name: str) -> QueueOut:
    (row,) = [q for q in queues.overview(conn) if q.name == name]
    return QueueOut.model_validate(row.model_dump())


@operation(Role.VIEWER, "List queues: depth, running, waits, pauses", response=QueueListOut)
async def index(api: ApiCall) -> Response:
    rows = await call(api.request, queues.overview)
    return json_response(
        QueueListOut(queues=[QueueOut.model_validate(r.model_dump()) for r in rows])
    )


@operation(Role.OPERATOR, "Pause a queue: no worker starts its runs until it is resumed",
           path={"name": str}, body=QueuePauseIn, response=QueueOut)  # fmt: skip
async def pause(api: ApiCall) -> Response:
    name, note = api.path["name"], api.body.note

    def do(conn: Conn) -> QueueOut:
        queues.pause(conn, name, actor=api.actor, note=note)
        return _one(conn, name)

    return json_response(await call(api.request, do))


@operation(Role.OPERATOR, "Resume a paused queue", path={"name": str}, response=QueueOut)
async def resume(api: ApiCall) -> Response:
    name = api.path["name"]

    def do(conn: Conn) -> QueueOut:
        queues.resume(conn, name, actor=api.actor)
        return _one(conn, name)

    return json_response(await call(api.request, do))


@operation(Role.OPERATOR, "Set a queue's concurrency and rate limits, fleet-wide",
           path={"name": str}, body=QueueLimitsIn, response=QueueOut)  # fmt: skip
async def set_limits(api: ApiCall) -> Response:
    name, body = api.path["name"], api.body

    def do(conn: Conn) -> QueueOut:
        limits = body.model_dump(include=set(queues.LIMIT_FIELDS))
        queues.set_limits(conn, name, actor=api.actor, **limits)
        return _one(conn, name)

    return json_response(await call(api.request, do))


routes = [
    Route(f"{PREFIX}/queues", index, methods=["GET"], name="api_queues_index"),
    Route(f"{PREFIX}/queues/{{name}}/pause", pause, methods=["POST"], name="api_queues_pause"),
    Route(f"{PREFIX}/queues/{{name}}/resume", resume, methods=["POST"],
          name="api_queues_resume"),
    Route(f"{PREFIX}/queues/{{name}}/limits", set_limits, methods=["PUT"],
          name="api_queues_limits"),
]  # fmt: skip
