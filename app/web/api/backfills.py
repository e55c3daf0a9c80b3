"""Backfills over the API: preview (`dry_run`) or start a backfill of a schedule over a
past range, list a schedule's backfills with their progress, cancel one — through
`app.scheduling.backfills`, the functions the CLI and the pages call. Starting and
cancelling are audited in the same transaction."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.core.errors import about
from app.people.roles import Role
from app.scheduling import backfills, schedule_reads, schedule_rules, schedule_spec
from app.scheduling.backfills import Preview
from app.scheduling.schedule_spec import ScheduleError
from app.web.api.core import PREFIX, ApiCall, ApiError, json_response, operation
from app.web.api.schemas import (
    BackfillCancelledOut,
    BackfillIn,
    BackfillListOut,
    BackfillOut,
    BackfillPreviewOut,
)
from app.web.database import call


def preview_doc(p: Preview) -> dict[str, Any]:
    """A backfill's preview as the API (and `sundial schedule backfill --json`) shows it."""

    def fire(f: Any, note: str | None = None) -> dict[str, Any] | None:
        return None if f is None else {"at": f.at, "local_time": f.local, "note": note}

    return {
        "backfill_id": p.backfill_id,
        "schedule": p.schedule,
        "timezone": p.timezone,
        "range_start": p.range_start,
        "range_end": p.range_end,
        "count": p.count,
        "first": fire(p.first),
        "last": fire(p.last),
        "clock_changes": [fire(f, note) for f, note in p.dst],
        "left_alone": [
            {"at": a.at, "local_time": a.local, "outcome": a.outcome} for a in p.left_alone
        ],
        "overlap": p.overlap,
        "concurrency": p.concurrency,
        "at_once": p.at_once,
        "overlap_note": p.overlap_words,
        "notes": p.notes,
    }


def _zone(conn: Conn, name: str) -> dict[str, Any]:
    try:
        return schedule_reads.find(conn, name)
    except ScheduleError:
        raise ApiError(404, f"there is no schedule named {name!r}") from None


def _start(conn: Conn, name: str, body: BackfillIn, actor: str) -> Preview:
    zone = _zone(conn, name)["timezone"]
    now = schedule_rules.db_now(conn)
    with about("start"):
        start = schedule_spec.parse_when(body.start, zone, now)
    with about("end"):
        end = schedule_spec.parse_when(body.end, zone, now)
    return backfills.start(conn, name, start=start, end=end, concurrency=body.concurrency,
                           dry_run=body.dry_run, actor=actor)  # fmt: skip


@operation(Role.OPERATOR, "Start a backfill of a schedule over a past range (or preview it)",
           path={"name": str}, body=BackfillIn, response=BackfillPreviewOut, status=201,
           also=(200, 404),
           description="Runs every fire the schedule's rule gives for the range, in its "
           "time zone, that its fire ledger does not hold yet, oldest first, at most "
           "`concurrency` at once (one at a time unless the schedule's overlap policy is "
           "`allow`). With `dry_run` nothing is created and the answer is 200.")  # fmt: skip
async def create(api: ApiCall) -> Response:
    shown = await call(api.request, _start, api.path["name"], api.body, api.actor)
    doc = BackfillPreviewOut.model_validate(preview_doc(shown))
    return json_response(doc, 200 if api.body.dry_run else 201)


def _listed(conn: Conn, name: str) -> list[dict[str, Any]]:
    row = _zone(conn, name)
    return backfills.listed(conn, schedule_id=row["id"])


def _out(row: dict[str, Any]) -> BackfillOut:
    return BackfillOut.model_validate(row)


@operation(Role.VIEWER, "A schedule's backfills, newest first, with their progress",
           path={"name": str}, response=BackfillListOut, also=(404,))  # fmt: skip
async def index(api: ApiCall) -> Response:
    rows = await call(api.request, _listed, api.path["name"])
    return json_response(BackfillListOut(backfills=[_out(r) for r in rows]))


def _cancel(conn: Conn, name: str, id_text: str, actor: str) -> tuple[Any, dict[str, Any]]:
    backfill_id = backfills.parse_id(id_text)
    rows = backfills.listed(conn, backfill_id=backfill_id)
    if not rows or rows[0]["schedule"] != name:
        raise ApiError(404, f"schedule {name!r} has no backfill {backfill_id}")
    cancelled = backfills.cancel(conn, backfill_id, actor=actor)
    return cancelled, backfills.listed(conn, backfill_id=backfill_id)[0]


@operation(Role.OPERATOR, "Cancel a backfill: its runs not started are cancelled, running "
           "ones asked to stop, no more are submitted", path={"name": str, "id": str},
           response=BackfillCancelledOut, also=(404, 409))  # fmt: skip
async def cancel(api: ApiCall) -> Response:
    name, id_text = api.path["name"], api.path["id"]
    cancelled, row = await call(api.request, _cancel, name, id_text, api.actor)
    return json_response(BackfillCancelledOut(backfill=_out(row), cancelled=cancelled.cancelled,
                                              asked_to_stop=cancelled.asked_to_stop))  # fmt: skip


routes = [
    Route(f"{PREFIX}/schedules/{{name}}/backfills", create, methods=["POST"],
          name="api_backfills_create"),
    Route(f"{PREFIX}/schedules/{{name}}/backfills", index, methods=["GET"],
          name="api_backfills_index"),
    Route(f"{PREFIX}/schedules/{{name}}/backfills/{{id}}/cancel", cancel, methods=["POST"],
          name="api_backfills_cancel"),
]  # fmt: skip
