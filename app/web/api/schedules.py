"""Schedules over the API: list, create, read, change, pause, resume, run now, delete, the
fire ledger and the next fires — through `app.scheduling.schedules`, the functions the CLI and the
pages call. Each change is audited in the same transaction as the change."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.sql import query
from app.people.roles import Role
from app.scheduling import schedule_reads, schedules
from app.scheduling.cron import local_time, next_fire
from app.scheduling.schedule_rules import db_now, recurrence_of
from app.scheduling.schedule_spec import ScheduleError, ScheduleSpec
from app.web.api.core import PREFIX, ApiCall, ApiError, json_response, operation
from app.web.api.schemas import (
    FireListOut,
    FiresQuery,
    NextFiresOut,
    NextFiresQuery,
    PauseIn,
    ScheduleChangedOut,
    ScheduleIn,
    ScheduleListOut,
    ScheduleOut,
    ScheduleRules,
    StartedOut,
)
from app.web.database import call

SPEC_FIELDS = frozenset(ScheduleSpec.model_fields)


def _out(row: dict[str, Any]) -> ScheduleOut:
    """A schedule row (with the names of what it runs) as the API shows it."""
    return ScheduleOut.model_validate({
        **row,
        "every_seconds": row["interval_seconds"],
        "paused": not row["active"],
        "job": row["job_name"],
        "workflow": row["workflow_name"],
    })  # fmt: skip


def _row(conn: Conn, name: str) -> dict[str, Any]:
    row = conn.execute(query("api", "api_schedule_by_name"), {"name": name}).fetchone()
    if row is None:
        raise ApiError(404, f"there is no schedule named {name!r}")
    return row


def _changed(conn: Conn, name: str, change: Callable[[], Any]) -> tuple[Any, dict[str, Any] | None]:
    """`change()` (a domain function, which audits itself) in one transaction; its result
    and the schedule after it (None once deleted)."""
    with conn.transaction():
        _row(conn, name)  # 404 for an unknown name
        result = change()
        after = conn.execute(query("api", "api_schedule_by_name"), {"name": name}).fetchone()
    return result, after


def _create(conn: Conn, given: ScheduleIn, actor: str) -> tuple[list[str], dict[str, Any]]:
    values = given.model_dump(exclude_none=True)
    values = {k: v for k, v in values.items() if k in SPEC_FIELDS}
    with conn.transaction():
        created = schedules.create_schedule(
            conn, ScheduleSpec.model_construct(**values), actor=actor
        )
        row = _row(conn, given.name)
    return created.warnings, row


def _update(conn: Conn, name: str, given: ScheduleRules, actor: str) -> tuple[Any, Any]:
    changes = given.model_dump(exclude_unset=True)
    if not changes:
        raise ApiError(422, "give at least one field to change", "body")
    return _changed(conn, name, lambda: schedules.update_schedule(conn, name, changes, actor=actor))


def _next_fires(conn: Conn, name: str, count: int) -> dict[str, Any]:
    """The same preview the schedule page shows: the next fires after now (or after the
    schedule's next fire when it is overdue), in its zone."""
    row = _row(conn, name)
    rule = recurrence_of(row)
    after: datetime = db_now(conn)
    fires: list[dict[str, Any]] = []
    while len(fires) < count:
        fire = next_fire(rule, after)
        if fire is None:
            break
        fires.append({"at": fire.at, "local_time": local_time(rule, fire.at)})
        after = fire.at
    return {"timezone": row["timezone"], "fires": fires}


@operation(Role.VIEWER, "List schedules", response=ScheduleListOut)
async def index(api: ApiCall) -> Response:
    rows = await call(api.request, schedule_reads.list_schedules)
    return json_response(ScheduleListOut(schedules=[_out(r) for r in rows]))


@operation(Role.EDITOR, "Create a schedule", body=ScheduleIn, response=ScheduleChangedOut,
           status=201, also=(404, 409))  # fmt: skip
async def create(api: ApiCall) -> Response:
    warnings, row = await call(api.request, _create, api.body, api.actor)
    return json_response(ScheduleChangedOut(schedule=_out(row), warnings=warnings), 201)


@operation(Role.VIEWER, "A schedule", path={"name": str}, response=ScheduleOut, also=(404,))
async def show(api: ApiCall) -> Response:
    row = await call(api.request, _row, api.path["name"])
    return json_response(_out(row))


@operation(
    Role.EDITOR,
    "Change when a schedule fires or its policies",
    path={"name": str},
    body=ScheduleRules,
    response=ScheduleChangedOut,
    also=(404,),
)
async def update(api: ApiCall) -> Response:
    updated, row = await call(api.request, _update, api.path["name"], api.body, api.actor)
    return json_response(ScheduleChangedOut(schedule=_out(row), warnings=updated.warnings))


@operation(Role.OPERATOR, "Pause a schedule", path={"name": str}, body=PauseIn,
           response=ScheduleOut, also=(404,))  # fmt: skip
async def pause(api: ApiCall) -> Response:
    name, body = api.path["name"], api.body

    def do(conn: Conn) -> Any:
        return _changed(
            conn, name, lambda: schedules.pause(conn, name, body.note, body.until, actor=api.actor)
        )[1]

    return json_response(_out(await call(api.request, do)))


@operation(Role.OPERATOR, "Resume a paused schedule", path={"name": str},
           response=ScheduleOut, also=(404,))  # fmt: skip
async def resume(api: ApiCall) -> Response:
    name = api.path["name"]

    def do(conn: Conn) -> Any:
        return _changed(conn, name, lambda: schedules.resume(conn, name, actor=api.actor))[1]

    return json_response(_out(await call(api.request, do)))


@operation(Role.OPERATOR, "Run a schedule's job (or workflow) now", path={"name": str},
           response=StartedOut, status=201, also=(404,))  # fmt: skip
async def run_now(api: ApiCall) -> Response:
    name = api.path["name"]

    def do(conn: Conn) -> Any:
        return _changed(conn, name, lambda: schedules.run_now(conn, name, actor=api.actor))[0]

    started = await call(api.request, do)
    return json_response(StartedOut(run_id=started.run_id, dag_run_id=started.dag_run_id), 201)


@operation(Role.EDITOR, "Delete a schedule and its fire ledger", path={"name": str},
           status=204, also=(404,))  # fmt: skip
async def delete(api: ApiCall) -> Response:
    name = api.path["name"]

    def do(conn: Conn) -> None:
        _changed(conn, name, lambda: schedules.delete(conn, name, actor=api.actor))

    await call(api.request, do)
    return Response(status_code=204)


@operation(Role.VIEWER, "A schedule's fire ledger, newest first", path={"name": str},
           query=FiresQuery, response=FireListOut, also=(404,))  # fmt: skip
async def fires(api: ApiCall) -> Response:
    name = api.path["name"]

    def read(conn: Conn) -> list[dict[str, Any]]:
        _row(conn, name)
        return schedule_reads.list_fires(conn, name, api.query.limit)

    rows = await call(api.request, read)
    return json_response(FireListOut.model_validate({"fires": rows}))


@operation(Role.VIEWER, "A schedule's next fires (the page's preview)", path={"name": str},
           query=NextFiresQuery, response=NextFiresOut, also=(404,))  # fmt: skip
async def next_fires(api: ApiCall) -> Response:
    doc = await call(api.request, _next_fires, api.path["name"], api.query.count)
    return json_response(NextFiresOut.model_validate(doc))


_ = ScheduleError  # raised by the domain functions; answered 422 by `operation`

routes = [
    Route(f"{PREFIX}/schedules", index, methods=["GET"], name="api_schedules_index"),
    Route(f"{PREFIX}/schedules", create, methods=["POST"], name="api_schedules_create"),
    Route(f"{PREFIX}/schedules/{{name}}", show, methods=["GET"], name="api_schedules_show"),
    Route(f"{PREFIX}/schedules/{{name}}", update, methods=["PATCH"], name="api_schedules_update"),
    Route(f"{PREFIX}/schedules/{{name}}", delete, methods=["DELETE"],
          name="api_schedules_delete"),
    Route(f"{PREFIX}/schedules/{{name}}/pause", pause, methods=["POST"],
          name="api_schedules_pause"),
    Route(f"{PREFIX}/schedules/{{name}}/resume", resume, methods=["POST"],
          name="api_schedules_resume"),
    Route(f"{PREFIX}/schedules/{{name}}/run-now", run_now, methods=["POST"],
          name="api_schedules_run_now"),
    Route(f"{PREFIX}/schedules/{{name}}/fires", fires, methods=["GET"],
          name="api_schedules_fires"),
    Route(f"{PREFIX}/schedules/{{name}}/next-fires", next_fires, methods=["GET"],
          name="api_schedules_next_fires"),
]  # fmt: skip
