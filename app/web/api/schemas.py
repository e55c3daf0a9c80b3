"""The JSON API's request and response shapes (pydantic): they validate requests and they
are the schemas of the OpenAPI document. Ranges come from `app.core.limits`, the same ones the
CLI and the pages enforce; the domain functions check them again."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
)

from app.core import limits
from app.handlers.execution_models import ExecutionModel
from app.runs.states import RunStatus
from app.scheduling.cron import DstRepeated, DstSkipped
from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.zones import iana_zone_names

MAX_BATCH = 1000  # runs per batch submit (the body limit holds first for large args)
MAX_PAGE = 500


def _whole(value: Any) -> Any:
    """JSON Schema's `integer`: 5.0 is one (a number without a fraction), `true` and "5"
    are not (the body is validated strictly)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Whole numbers: the bounds come before the validator, so the document states them.
WHOLE = BeforeValidator(_whole)
# A name as every door reads it (app.core.limits.check_name)
Name = Annotated[
    str, Field(min_length=1, max_length=limits.MAX_NAME_LENGTH, pattern=limits.NAME_PATTERN)
]
Priority = Annotated[int, Field(ge=-limits.MAX_PRIORITY, le=limits.MAX_PRIORITY), WHOLE]
Timeout = Annotated[int, Field(ge=1, le=limits.MAX_DURATION_SECONDS), WHOLE]
Retries = Annotated[int, Field(ge=0, le=limits.MAX_RETRIES), WHOLE]
Crashes = Annotated[int, Field(ge=1, le=limits.MAX_CRASHES), WHOLE]
Seconds = Annotated[float, Field(ge=0, le=limits.MAX_DURATION_SECONDS)]
Count = Annotated[int, Field(ge=1, le=limits.MAX_COUNT), WHOLE]
# Exactly the zones of the IANA tz database (app.scheduling.zones.zone_named), listed in the
# document.
Zone = Annotated[
    str,
    Field(min_length=1, max_length=limits.MAX_NAME_LENGTH),
    WithJsonSchema({"type": "string", "enum": sorted(iana_zone_names())}),
]


def _given(*fields: str) -> dict[str, Any]:
    """A JSON schema that holds when all these fields are given, and not null."""
    return {"required": list(fields), "properties": {f: {"not": {"type": "null"}} for f in fields}}


def exactly_one(*fields: str) -> dict[str, Any]:
    return {"oneOf": [_given(f) for f in fields]}


def not_both(first: str, second: str) -> dict[str, Any]:
    return {"not": _given(first, second)}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    message: str
    field: str | None


class ErrorOut(BaseModel):
    """Every refusal: a sentence for a person and the field at fault, if one is."""

    error: ErrorDetail


# ---- runs ---------------------------------------------------------------------------------


class RunSettings(Strict):
    """What one run does and how. Settings left out come from the job definition (when
    submitting by `job`) or Sundial's defaults."""

    args: dict[str, Any] | None = Field(None, description="Handler arguments, a JSON object.")
    priority: Priority | None = Field(None, description="Higher runs first. Default 1.")
    timeout_seconds: Timeout | None = Field(None, description="Default 300.")
    max_retries: Retries | None = Field(None, description="Default 3.")
    execution_model: ExecutionModel | None = Field(None, description="Default async.")


class RunIn(RunSettings):
    """Submit one run of a handler, or of a job definition by its name."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [exactly_one("handler", "job"), not_both("delay_seconds", "run_at")]
        },
    )

    handler: Name | None = Field(None, description="A registered handler (or give `job`).")
    job: Name | None = Field(None, description="A job definition's name (or give `handler`).")
    run_at: AwareDatetime | None = Field(None, description="Do not start before this time.")
    delay_seconds: Seconds | None = Field(None, description="Do not start before now + this.")
    idempotency_key: (
        Annotated[
            str, Field(min_length=1, max_length=limits.MAX_KEY_LENGTH, pattern=limits.NAME_PATTERN)
        ]
        | None
    ) = Field(
        None,
        description="Submitting again with this key and the same payload returns the same "
        "run (200); with another payload it is refused (409).",
    )


class RunBatchIn(Strict):
    runs: list[RunIn] = Field(min_length=1, max_length=MAX_BATCH)


class DagNodeIn(RunSettings):
    handler: Name
    delay_seconds: Seconds | None = None
    after: list[Name] = Field(default_factory=list, description="Upstream node names.")


class DagIn(Strict):
    """A DAG: nodes by name; a node starts after all its upstreams completed."""

    name: Annotated[str, Field(max_length=limits.MAX_NAME_LENGTH)] = ""
    nodes: dict[Name, DagNodeIn] = Field(min_length=1, max_length=MAX_BATCH)
    edges: list[Annotated[list[Name], Field(min_length=2, max_length=2)]] = Field(
        default_factory=list, description="[upstream, downstream] pairs."
    )


class AttemptOut(BaseModel):
    attempt: int
    worker: str | None
    outcome: str
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None


class RunOut(BaseModel):
    id: int
    status: RunStatus
    handler: str
    args: dict[str, Any]
    priority: int
    execution_model: str
    run_at: datetime
    attempt: int
    max_retries: int
    crash_count: int = Field(description="Times its worker stopped while running it.")
    quarantined: bool = Field(description="Set aside (failed) after too many crashes.")
    timeout_seconds: int
    idempotency_key: str | None
    job_id: uuid.UUID | None
    schedule_id: uuid.UUID | None
    dag_run_id: uuid.UUID | None
    dag_node: str | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    result: Any = None


class RunDetailOut(RunOut):
    attempts: list[AttemptOut]


class SubmittedOut(BaseModel):
    created: bool = Field(description="False: the idempotency key named this existing run.")
    run: RunOut


class SubmittedIdOut(BaseModel):
    id: int
    created: bool


class BatchOut(BaseModel):
    runs: list[SubmittedIdOut]


class RunPageQuery(Strict):
    status: RunStatus | None = None
    handler: Name | None = None
    schedule: Name | None = Field(None, description="Runs of this schedule.")
    before: Annotated[int, Field(ge=1, le=limits.MAX_RUN_ID)] | None = Field(
        None, description="Keyset cursor: runs with a smaller id (the next of a page)."
    )
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50


class RunPageOut(BaseModel):
    runs: list[RunOut]
    next: int | None = Field(description="Pass as `before` for the next page; null at the end.")


class CancelOut(BaseModel):
    status: RunStatus = Field(description="cancelled, or running when its worker will stop it.")
    run: RunOut


class RetryOut(BaseModel):
    run: RunOut
    unskipped: list[int] = Field(description="DAG steps that wait for this run again.")


class DagOut(BaseModel):
    dag_run_id: uuid.UUID
    runs: dict[str, int]


class DagRunStepOut(BaseModel):
    id: int
    dag_node: str | None
    status: RunStatus
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None


class DagRunOut(BaseModel):
    dag_run_id: uuid.UUID
    runs: list[DagRunStepOut]


# ---- jobs and workflows -------------------------------------------------------------------


class JobOut(BaseModel):
    name: str
    handler: str
    args: dict[str, Any]
    execution_model: str
    priority: int
    timeout_seconds: int
    max_retries: int
    max_crashes: int


class JobListOut(BaseModel):
    jobs: list[JobOut]


def _changes_schema(schema: dict[str, Any]) -> None:
    """A change names at least one field and none is null (null is refused: the field
    would have no value)."""
    schema["minProperties"] = 1
    for prop in schema.get("properties", {}).values():
        kinds = prop.pop("anyOf", None)
        if kinds is not None:
            (kind,) = [k for k in kinds if k != {"type": "null"}]
            prop.update(kind)
        prop.pop("default", None)


class JobChanges(Strict):
    """What to change in a job definition; fields left out keep their value."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_changes_schema)

    name: Name | None = Field(None, description="A new name; schedules and workflows follow.")
    handler: Name | None = None
    args: dict[str, Any] | None = Field(None, description="Handler arguments, a JSON object.")
    execution_model: ExecutionModel | None = None
    priority: Priority | None = None
    timeout_seconds: Timeout | None = None
    max_retries: Retries | None = None
    max_crashes: Crashes | None = None


class JobIn(RunSettings):
    """A new job definition: a handler with its args and run settings (defaults as for
    a run)."""

    name: Name
    handler: Name
    max_crashes: Crashes | None = Field(
        None,
        description="Times one of its runs may crash the process running it before that run "
        f"is quarantined. Default {limits.DEFAULT_MAX_CRASHES}.",
    )


class JobChangedOut(BaseModel):
    job: JobOut
    warnings: list[str] = Field(description="E.g. a handler no live worker offers yet.")


class DeleteQuery(Strict):
    with_schedules: bool = Field(
        False, description="Also delete the schedules that run it (refused otherwise, 409)."
    )


class DeletedOut(BaseModel):
    schedules_deleted: list[str]


class WorkflowStepOut(BaseModel):
    job: str
    args: dict[str, Any]


class WorkflowOut(BaseModel):
    name: str
    description: str
    steps: dict[str, WorkflowStepOut]
    edges: list[list[str]] = Field(description="[upstream, downstream] pairs.")


class WorkflowSummaryOut(BaseModel):
    name: str
    description: str
    steps: int
    schedules: int


class WorkflowListOut(BaseModel):
    workflows: list[WorkflowSummaryOut]


class WorkflowStepIn(Strict):
    job: Name = Field(description="A job definition's name.")
    args: dict[str, Any] = Field(default_factory=dict, description="Merged over the job's.")
    after: list[Name] = Field(default_factory=list, description="Upstream step names.")


class WorkflowShapeIn(Strict):
    """A workflow's steps (by name) and the order between them."""

    description: Annotated[str, Field(max_length=limits.MAX_TEXT_LENGTH)] = ""
    steps: dict[Name, WorkflowStepIn] = Field(min_length=1, max_length=MAX_BATCH)
    edges: list[Annotated[list[Name], Field(min_length=2, max_length=2)]] = Field(
        default_factory=list, description="[upstream, downstream] pairs."
    )


class WorkflowIn(WorkflowShapeIn):
    name: Name


# ---- schedules ----------------------------------------------------------------------------


# What a schedule always has: a change may set these, never clear them (null).
ALWAYS_SET = ("timezone", "overlap", "catchup", "exact_minute", "spread_seconds", "dst_skipped",
              "dst_repeated")  # fmt: skip


def _rules_change_schema(schema: dict[str, Any]) -> None:
    schema["minProperties"] = 1
    for name in ALWAYS_SET:
        prop = schema["properties"][name]
        (kind,) = [k for k in prop.pop("anyOf") if k != {"type": "null"}]
        prop.update(kind)
        prop.pop("default", None)


class ScheduleRules(Strict):
    """When a schedule fires and its policies (see docs/schedules.md). A
    change gives at least one of them; null clears a bound, a limit or the other rule."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_rules_change_schema)

    cron: Annotated[str, Field(min_length=1, max_length=limits.MAX_TEXT_LENGTH)] | None = None
    every_seconds: Timeout | None = None
    timezone: Zone | None = None
    start_at: AwareDatetime | None = None
    end_at: AwareDatetime | None = None
    overlap: OverlapPolicy | None = None
    catchup: bool | None = None
    catchup_limit: Count | None = None
    catchup_window_seconds: Timeout | None = None
    exact_minute: bool | None = None
    spread_seconds: Annotated[int, Field(ge=0, le=limits.MAX_DURATION_SECONDS), WHOLE] | None = None
    dst_skipped: DstSkipped | None = None
    dst_repeated: DstRepeated | None = None
    auto_pause_after: Count | None = None


class ScheduleIn(ScheduleRules, RunSettings):
    """A new schedule of an existing job (`job`), a workflow (`workflow`), or a handler
    with its settings (a job definition is made for it)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                exactly_one("cron", "every_seconds"),
                exactly_one("job", "workflow", "handler"),
            ]
        },
    )

    name: Name
    job: Name | None = None
    workflow: Name | None = None
    handler: Name | None = None


class ScheduleOut(BaseModel):
    name: str
    cron: str | None
    every_seconds: int | None
    timezone: str
    next_fire_time: datetime | None
    paused: bool
    paused_until: datetime | None
    job: str | None
    workflow: str | None
    overlap: str
    catchup: bool


class ScheduleListOut(BaseModel):
    schedules: list[ScheduleOut]


class ScheduleChangedOut(BaseModel):
    schedule: ScheduleOut
    warnings: list[str]


class PauseIn(Strict):
    note: Annotated[str, Field(max_length=limits.MAX_TEXT_LENGTH)] | None = None
    until: AwareDatetime | None = None


class StartedOut(BaseModel):
    run_id: int | None
    dag_run_id: uuid.UUID | None


# A wall-clock time in a schedule's zone has no offset, which RFC 3339's `date-time` requires:
# the document says what it is, an ISO 8601 local date and time.
WallClock = Annotated[
    datetime,
    PlainSerializer(lambda moment: moment.isoformat(), return_type=str),
    WithJsonSchema({
        "type": "string",
        "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?$",
        "description": "A wall-clock time in the schedule's zone, without an offset.",
    }),
]  # fmt: skip


class FireOut(BaseModel):
    fire_time: datetime
    local_time: WallClock | None
    outcome: str
    run_id: int | None
    dag_run_id: uuid.UUID | None
    detail: str | None


class FireListOut(BaseModel):
    fires: list[FireOut]


class FiresQuery(Strict):
    limit: Annotated[int, Field(ge=1, le=limits.MAX_FIRES_SHOWN)] = 50


class NextFireOut(BaseModel):
    at: datetime = Field(description="The instant (UTC) of the fire.")
    local_time: WallClock = Field(description="The wall-clock time it stands for, in the zone.")


class NextFiresOut(BaseModel):
    timezone: str
    fires: list[NextFireOut]


class NextFiresQuery(Strict):
    count: Annotated[int, Field(ge=1, le=100)] = 10
