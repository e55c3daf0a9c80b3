"""The JSON API's request and response shapes: they validate requests and they are the
schemas of the OpenAPI document.

They are built from the domains' SQLModel fields (`app.runs.run_fields`,
`app.catalog.job_fields`, `app.scheduling.schedule_fields`), the same classes the tables
inherit: a response shape is a fields class with what the API adds; a request shape takes
the fields it accepts, and a change shape declares the same kinds (`app.core.fields`) as
optional. `tests/unit/test_model_fields.py` holds them to each other and to the tables.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
)

from app.catalog.job_fields import JobFields
from app.catalog.workflow_fields import WorkflowFields, WorkflowStepFields
from app.core import limits
from app.core.fields import (
    Count,
    Crashes,
    Duration,
    Key,
    Name,
    Priority,
    Retries,
    Seconds,
    Shape,
    Text,
    WholeSeconds,
)
from app.handlers.execution_models import ExecutionModel
from app.runs.breakers import MAX_PROBES, MAX_WINDOW_SECONDS, Breaker
from app.runs.queues import MAX_WEIGHT, MAX_WEIGHTS, QueueRow
from app.runs.run_fields import AttemptFields, RunRow, RunSettingsFields
from app.runs.run_search import MAX_SEARCH_LENGTH
from app.runs.run_timeline import ActorKind, EventKind
from app.runs.states import RunStatus
from app.scheduling.cron import DstRepeated, DstSkipped
from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_fields import Cron, FireFields, ScheduleFields, WallClock, Zone

MAX_BATCH = 1000  # runs per batch submit (the body limit holds first for large args)
MAX_PAGE = 500


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


def left_out(fields: type[BaseModel], name: str) -> Any:
    """A field of a change or an optional setting: None (left out), described as the fields
    class describes it."""
    return Field(None, description=fields.model_fields[name].description)


class RunSettings(Strict):
    """What one run does and how. Settings left out come from the job definition (when
    submitting by `job`) or Sundial's defaults."""

    args: dict[str, Any] | None = left_out(RunSettingsFields, "args")
    priority: Priority | None = left_out(RunSettingsFields, "priority")
    timeout_seconds: Duration | None = left_out(RunSettingsFields, "timeout_seconds")
    max_retries: Retries | None = left_out(RunSettingsFields, "max_retries")
    execution_model: ExecutionModel | None = left_out(RunSettingsFields, "execution_model")
    queue: Name | None = left_out(RunSettingsFields, "queue")


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
    deadline: AwareDatetime | None = Field(
        None,
        description="Not started by this time, the run ends skipped, as expired (for work "
        "only useful for a while).",
    )
    idempotency_key: Key | None = Field(
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


class AttemptOut(AttemptFields):
    """One finished attempt of a run."""


class RunOut(RunRow):
    """A run (app.runs.run_fields)."""


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
    search: Annotated[str, Field(min_length=1, max_length=MAX_SEARCH_LENGTH)] | None = Field(
        None,
        description="Runs by what they carried: `customer_id = 42`, `order.region = eu`, "
        "several joined by `and`; `result.total = 3` searches the result. A number (or "
        "true, false, null) also matches the same text as a string; quote a value to "
        'match only the string: `customer_id = "42"`.',
    )
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


class RunEventActorOut(BaseModel):
    kind: ActorKind
    name: str | None = Field(
        description="The worker's id, the person's user name, the schedule's or step's "
        "name; null when the kind says it all (the reaper, Sundial) or it is unknown."
    )
    words: str = Field(description="Who, as the dashboard says it.")


class RunEventOut(BaseModel):
    at: datetime | None = Field(description="When; null when the records do not say.")
    kind: EventKind
    actor: RunEventActorOut
    summary: str = Field(description="What happened, in words.")
    detail: str | None = Field(description="More: the attempt's error, a reason, who is unknown.")
    attempt: int | None = Field(description="The attempt it concerns, if one.")
    until: datetime | None = Field(
        description="A time it points at: when a delayed run is due (submitted), the next "
        "try (retry_scheduled), when it runs again (snoozed), its deadline (skipped)."
    )
    service: str | None = Field(description="For breaker: the service whose breaker changed.")
    breaker_state: str | None = Field(description="For breaker: its new state.")


class RunEventsOut(BaseModel):
    run_id: int
    events: list[RunEventOut] = Field(description="Oldest first; events of unknown time last.")


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


class TimelineSegmentOut(BaseModel):
    kind: str = Field(
        description="waiting (for the steps before it), queued (for a free worker), ran (an "
        "attempt that completed or is running), failed (an attempt that failed, timed out, "
        "was lost or cancelled), paused (an attempt snoozed or handed back), retrying "
        "(waiting to try again)."
    )
    start: datetime
    end: datetime = Field(description="The time of the read while `open`.")
    seconds: float
    attempt: int | None = Field(description="The attempt, for ran, failed and paused.")
    outcome: str | None = Field(description="How the attempt ended (running: not yet).")
    open: bool = Field(description="Still going.")


class TimelineStepOut(BaseModel):
    name: str
    run_id: int
    status: str = Field(description="The run's status, or retrying.")
    upstreams: list[str]
    on_longest_chain: bool = Field(
        description="On the chain of steps that decided when the DAG run ended."
    )
    waited_seconds: float = Field(description="Waiting for the steps before it.")
    queued_seconds: float = Field(description="Ready, waiting for a free worker.")
    ran_seconds: float = Field(description="In attempts, failed ones included.")
    retry_wait_seconds: float
    attempts: int
    retries: int
    failed_attempts: int
    segments: list[TimelineSegmentOut]


class DagTimelineOut(BaseModel):
    dag_run_id: uuid.UUID
    start: datetime
    end: datetime
    seconds: float
    live: bool = Field(description="Steps are still to end: `end` is the time of the read.")
    longest_chain: list[str] = Field(description="Step names, first to last.")
    steps: list[TimelineStepOut]


class DurationHourOut(BaseModel):
    hour: datetime
    runs: int
    p50_seconds: float | None
    p95_seconds: float | None


class SlowRunOut(BaseModel):
    run_id: int
    status: RunStatus
    attempt: int
    started_at: datetime
    finished_at: datetime
    seconds: float


class JobDurationsOut(BaseModel):
    job: str
    since: datetime = Field(description="The first hour of the week.")
    through: datetime | None = Field(description="Runs that ended before this are counted.")
    hours: list[DurationHourOut] = Field(description="The hours with endings, oldest first.")
    slowest: list[SlowRunOut] = Field(description="The week's 10 slowest runs, slowest first.")


# ---- jobs and workflows -------------------------------------------------------------------


class JobOut(JobFields):
    """A job definition (app.catalog.job_fields)."""


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
    handler: Name | None = left_out(JobFields, "handler")
    args: dict[str, Any] | None = left_out(JobFields, "args")
    execution_model: ExecutionModel | None = left_out(JobFields, "execution_model")
    priority: Priority | None = left_out(JobFields, "priority")
    timeout_seconds: Duration | None = left_out(JobFields, "timeout_seconds")
    max_retries: Retries | None = left_out(JobFields, "max_retries")
    max_crashes: Crashes | None = left_out(JobFields, "max_crashes")
    queue: Name | None = left_out(JobFields, "queue")
    dependencies: Annotated[list[Name], Field(max_length=limits.MAX_DEPENDENCIES)] | None = (
        left_out(JobFields, "dependencies")
    )


class JobIn(JobFields, Shape):
    """A new job definition: a handler with its args and run settings (defaults as for
    a run)."""


class JobChangedOut(BaseModel):
    job: JobOut
    warnings: list[str] = Field(description="E.g. a handler no live worker offers yet.")


class DeleteQuery(Strict):
    with_schedules: bool = Field(
        False, description="Also delete the schedules that run it (refused otherwise, 409)."
    )


class JobRunIn(Strict):
    """Start one run of a job definition now, with its settings."""

    args: dict[str, Any] | None = Field(
        None,
        description="The run's arguments, checked against the schema its handler declares "
        "(as the job's own are); left out: the job's own arguments.",
    )


class WorkflowRunIn(Strict):
    """Start one DAG run of a workflow now."""

    args: dict[str, dict[str, Any]] | None = Field(
        None,
        description="Arguments of some steps, by step name, instead of the job's arguments "
        "under the step's; checked like a job's own. Steps left out run with their own.",
    )


class DeletedOut(BaseModel):
    schedules_deleted: list[str]


class WorkflowStepOut(WorkflowStepFields):
    job: str = Field(description="The job definition it runs, by name.")


class WorkflowOut(WorkflowFields):
    """A workflow (app.catalog.workflow_fields): its steps by name and the edges."""

    steps: dict[str, WorkflowStepOut]
    edges: list[list[str]] = Field(description="[upstream, downstream] pairs.")


class WorkflowSummaryOut(WorkflowFields):
    steps: int
    schedules: int


class WorkflowListOut(BaseModel):
    workflows: list[WorkflowSummaryOut]


class WorkflowStepIn(Strict):
    job: Name = Field(description="A job definition's name.")
    args: dict[str, Any] = Field(
        default_factory=dict, description=WorkflowStepFields.model_fields["args"].description
    )
    after: list[Name] = Field(default_factory=list, description="Upstream step names.")


class WorkflowShapeIn(Strict):
    """A workflow's steps (by name) and the order between them."""

    description: Text = ""
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

    cron: Cron | None = None
    every_seconds: Duration | None = None
    timezone: Zone | None = None
    start_at: AwareDatetime | None = None
    end_at: AwareDatetime | None = None
    overlap: OverlapPolicy | None = None
    catchup: bool | None = None
    catchup_limit: Count | None = None
    catchup_window_seconds: Duration | None = None
    exact_minute: bool | None = None
    spread_seconds: WholeSeconds | None = None
    dst_skipped: DstSkipped | None = None
    dst_repeated: DstRepeated | None = None
    auto_pause_after: Count | None = None
    expire_after_seconds: Duration | None = None


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


class ScheduleOut(ScheduleFields):
    """A schedule (app.scheduling.schedule_fields) and what it runs."""

    paused: bool
    job: str | None = Field(description="The job definition it runs, by name.")
    workflow: str | None = Field(description="The workflow it runs, by name.")


class ScheduleListOut(BaseModel):
    schedules: list[ScheduleOut]


class ScheduleChangedOut(BaseModel):
    schedule: ScheduleOut
    warnings: list[str]


class PauseIn(Strict):
    note: Text | None = None
    until: AwareDatetime | None = None


class StartedOut(BaseModel):
    run_id: int | None
    dag_run_id: uuid.UUID | None


class FireOut(FireFields):
    """One fire of a schedule, from the fire ledger."""


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


# ---- queues -------------------------------------------------------------------------------


class QueueOut(QueueRow):
    """A named queue: what waits in it, what runs from it, and whether it is paused."""


class QueueListOut(BaseModel):
    queues: list[QueueOut]


class QueuePauseIn(Strict):
    note: Text | None = Field(None, description="Why, shown with the pause.")


class QueueLimitsIn(Strict):
    """A queue's concurrency limits, replacing the ones it had; a limit left out is none.
    Runs over a limit wait, pending, with no attempt spent."""

    max_running: Count | None = Field(
        None, description="At most this many of its runs running at once, fleet-wide."
    )
    key_field: Name | None = Field(
        None,
        description="The args field whose value is a run's key, e.g. customer_id; needs "
        "key_max_running.",
    )
    key_max_running: Count | None = Field(
        None, description="At most this many runs of one key running at once; needs key_field."
    )
    rate_limit: Count | None = Field(
        None, description="At most this many starts per rate_period_seconds, evenly spaced."
    )
    rate_period_seconds: Duration | None = Field(
        None, description="The rate's period in seconds (for 20 a second: 1); needs rate_limit."
    )
    rate_burst: Count | None = Field(
        None, description="How many may start at once after a quiet spell (default 1)."
    )
    rate_per_key: bool = Field(
        False, description="The rate applies to each key (key_field), not the whole queue."
    )
    fair_share: bool = Field(
        False,
        description="Start runs key by key in turns (key_field), so that no key's backlog "
        "holds another key's runs up; each key's own runs in priority order.",
    )
    key_weights: dict[Key, Annotated[int, Field(ge=1, le=MAX_WEIGHT, strict=True)]] = Field(
        default_factory=dict,
        max_length=MAX_WEIGHTS,
        description="With fair_share: a key's starts per turn (1 unless listed), e.g. "
        '{"acme": 3}; at most 1,000 keys.',
    )


# ---- circuit breakers ------------------------------------------------------------------------

Share = Annotated[float, Field(ge=0, le=1)]
WindowSeconds = Annotated[int, Field(ge=1, le=MAX_WINDOW_SECONDS)]


class BreakerOut(Breaker):
    """The circuit breaker of a service that job definitions name as called by their runs."""


class BreakerListOut(BaseModel):
    breakers: list[BreakerOut]


class BreakerSettingsIn(Strict):
    """A service's breaker and retry-budget settings, replacing the ones it had; a setting
    left out takes its default."""

    failure_threshold: Share | None = Field(
        None, description="Open when this share of its calls in the window failed (0.5)."
    )
    min_calls: Count | None = Field(None, description="Judge only after this many calls (5).")
    window_seconds: WindowSeconds | None = Field(None, description="The window (60 s).")
    cool_off_seconds: WindowSeconds | None = Field(
        None, description="How long it stays open before trial runs go (30 s)."
    )
    probes: Annotated[int, Field(ge=1, le=MAX_PROBES)] | None = Field(
        None, description="Trial runs let through after the cool-off (3)."
    )
    retry_budget: Share | None = Field(
        None, description="Retries may reach this share of the first attempts (none: no budget)."
    )
    retry_window_seconds: WindowSeconds | None = Field(
        None, description="The retry budget's window (300 s)."
    )


class BreakerNoteIn(Strict):
    note: Text | None = Field(None, description="Why, kept with the breaker and audited.")


# ---- backfills ------------------------------------------------------------------------------


class BackfillIn(Strict):
    start: Text = Field(
        description="The range's first instant: 2026-03-27T00:00 in the schedule's time zone, "
        "or an ISO time with an offset."
    )
    end: Text = Field(description="The range's last instant (included), written like `start`.")
    concurrency: Annotated[int, Field(ge=1, le=limits.MAX_BACKFILL_CONCURRENCY)] = Field(
        default=1, description="How many of the backfill's runs may run at once."
    )
    dry_run: bool = Field(default=False, description="Only say what it would run.")


class BackfillFireOut(BaseModel):
    at: datetime = Field(description="The instant (UTC) of the fire.")
    local_time: WallClock = Field(description="The wall-clock time it stands for, in the zone.")
    note: str | None = Field(default=None, description="What the clock change did to it.")


class LeftAloneOut(BaseModel):
    at: datetime
    local_time: WallClock
    outcome: str = Field(description="What its fire ledger row says became of it.")


class BackfillPreviewOut(BaseModel):
    backfill_id: uuid.UUID | None = Field(description="The backfill started; null on a dry run.")
    schedule: str
    timezone: str
    range_start: datetime
    range_end: datetime
    count: int = Field(description="Runs it creates: the rule's fires of the range not yet run.")
    first: BackfillFireOut | None
    last: BackfillFireOut | None
    clock_changes: list[BackfillFireOut]
    left_alone: list[LeftAloneOut]
    overlap: OverlapPolicy
    concurrency: int
    at_once: int = Field(description="Runs at once, the schedule's overlap policy applied.")
    overlap_note: str
    notes: list[str]


class BackfillOut(BaseModel):
    id: uuid.UUID
    schedule: str
    status: str = Field(description="running, done or cancelled.")
    range_start: datetime
    range_end: datetime
    concurrency: int
    fire_count: int
    left_alone: int
    done: int
    running: int
    waiting: int
    failed: int
    stopped: int = Field(description="Runs cancelled or skipped.")
    not_run: int = Field(description="Fires a cancelled backfill never submitted.")
    created_by: str
    created_at: datetime
    ended_at: datetime | None


class BackfillListOut(BaseModel):
    backfills: list[BackfillOut]


class BackfillCancelledOut(BaseModel):
    backfill: BackfillOut
    cancelled: int = Field(description="Runs that had not started, now cancelled.")
    asked_to_stop: int = Field(description="Running runs asked to stop.")


# ---- notifications --------------------------------------------------------------------------


class NotificationRuleOut(BaseModel):
    id: uuid.UUID
    event: str = Field(description="dead_letter, breaker_open, lag or dead_man")
    job: str | None = Field(None, description="Only this job's events (dead letters).")
    schedule: str | None = Field(None, description="Only this schedule's events.")
    words: str = Field(description="The rule as a sentence.")


class NotificationChannelOut(BaseModel):
    id: uuid.UUID
    name: str
    kind: str = Field(description="webhook, slack, email or apprise")
    address: str = Field(description="A hint of the saved address; the address is never sent.")
    per_minute: int
    rules: list[NotificationRuleOut]


class NotificationListOut(BaseModel):
    channels: list[NotificationChannelOut]


class NotificationMessageOut(BaseModel):
    id: int = Field(description="The message's id, also its webhook Idempotency-Key.")
    event: str
    title: str
    status: str = Field(description="pending, sent or failed")
    tries: int
    last_error: str | None = Field(None, description="What went wrong on the last try.")
    created_at: datetime
    sent_at: datetime | None = None
