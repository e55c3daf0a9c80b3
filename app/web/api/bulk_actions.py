"""Acting on many runs over the API: `POST /runs/cancel|retry|rerun` with a filter (the
runs list's, every field of it) or ids starts a bulk action (`app.runs.bulk_actions`) and
answers 202 at once; `GET /bulk-actions/{action_id}` tells how far it got."""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, create_model
from starlette.responses import Response
from starlette.routing import Route

from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError
from app.handlers.gate import may_run_commands
from app.people.roles import Role
from app.runs import bulk_actions
from app.runs.bulk_actions import BulkVerb, Selection
from app.runs.run_list import RunFilter
from app.web.api.core import PREFIX, ApiCall, ApiError, json_response, operation
from app.web.api.schemas import Strict
from app.web.database import call

# Every field of the runs list's filter but its paging, with its own type: a field added
# to RunFilter is a field of this body too.
_HINTS = typing.get_type_hints(RunFilter)
RunFilterIn: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "RunFilterIn",
    __base__=Strict,
    **{
        f.name: (_HINTS[f.name], Field(None, description=bulk_actions.LABELS.get(f.name)))
        for f in dataclasses.fields(RunFilter)
        if f.name not in bulk_actions.PAGING_FIELDS
    },
)


class BulkIn(Strict):
    filter: RunFilterIn | None = Field(
        None,
        description="Every run this matches (the runs list's filter: status, job, schedule, "
        "dag_run_id, since, until, error, queue); {} matches every run.",
    )
    ids: list[typing.Annotated[int, Field(ge=1, le=limits.MAX_RUN_ID)]] | None = Field(
        None, max_length=bulk_actions.MAX_TICKED, description="Or these runs."
    )


class BulkActionOut(BaseModel):
    id: int
    action: BulkVerb
    described: str = Field(description="The filter or the ids, in words.")
    total: int = Field(description="How many runs it counted when it started.")
    done: int = Field(description="Runs it changed so far.")
    skipped: int = Field(description="Runs it left alone: the action does not apply to them.")
    status: str = Field(description="running or finished")
    interrupted: bool = Field(
        description="Its process stopped; another web process goes on where it stopped."
    )
    state: str = Field(description="How far it got, in words.")
    actor: str
    created_at: datetime
    finished_at: datetime | None


def _start(conn: Conn, verb: BulkVerb, body: BulkIn, actor: str, owner: str) -> dict[str, Any]:
    if (body.filter is None) == (body.ids is None):
        raise ApiError(422, "give either filter or ids", "filter")
    if body.filter is not None:
        where = RunFilter(**body.filter.model_dump(exclude_none=True))
        selection = Selection(where=where)
    else:
        selection = Selection(run_ids=tuple(body.ids or ()))
    action_id = bulk_actions.start(
        conn, verb, selection.check(), actor=actor, owner=owner,
        may_run_commands=may_run_commands.get(),
    )  # fmt: skip
    return bulk_actions.get(conn, action_id)


def _starter(verb: BulkVerb, summary: str) -> Any:
    @operation(
        Role.OPERATOR,
        summary,
        body=BulkIn,
        response=BulkActionOut,
        status=202,
        description="Starts at once and answers 202; the runs move in batches of "
        f"{bulk_actions.BATCH_SIZE:,} in the background. Runs the action does not apply to "
        "are skipped and counted. One audit entry holds the filter and the count. "
        "Follow it with GET /bulk-actions/{action_id}.",
    )
    async def start(api: ApiCall) -> Response:
        runner = api.request.app.state.bulk_runner
        row = await call(api.request, _start, verb, api.body, api.actor, runner.owner)
        runner.launch(row["id"])
        return json_response(BulkActionOut.model_validate(row), 202)

    start.__name__ = f"bulk_{verb.value}"
    return start


cancel_many = _starter(BulkVerb.CANCEL, "Cancel every run a filter matches, or many ids")
retry_many = _starter(BulkVerb.RETRY, "Retry every failed run a filter matches, or many ids")
rerun_many = _starter(
    BulkVerb.RERUN, "Submit again, with the same arguments, every run a filter matches"
)


def _get(conn: Conn, action_id: int) -> dict[str, Any]:
    try:
        return bulk_actions.get(conn, action_id)
    except UsageError as exc:
        raise ApiError(404, str(exc)) from None


@operation(Role.VIEWER, "How far a bulk action got", path={"action_id": int},
           response=BulkActionOut, also=(404,))  # fmt: skip
async def show(api: ApiCall) -> Response:
    row = await call(api.request, _get, api.path["action_id"])
    return json_response(BulkActionOut.model_validate(row))


routes = [
    Route(f"{PREFIX}/runs/cancel", cancel_many, methods=["POST"], name="api_runs_cancel_many"),
    Route(f"{PREFIX}/runs/retry", retry_many, methods=["POST"], name="api_runs_retry_many"),
    Route(f"{PREFIX}/runs/rerun", rerun_many, methods=["POST"], name="api_runs_rerun_many"),
    Route(f"{PREFIX}/bulk-actions/{{action_id}}", show, methods=["GET"], name="api_bulk_show"),
]
