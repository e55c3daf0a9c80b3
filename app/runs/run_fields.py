"""A run's fields as SQLModel declares them, once: the `job_runs` table (`app.models.JobRun`)
inherits them and adds the columns only the run's machinery reads (leases, crash
accounting, DAG counters); the API's run shapes and the rows `app.runs.run_reads` returns
are these classes.

Reads build rows with `model_construct` (no validation: the database already holds them to
the same ranges); the API validates what people send against the same fields.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import AwareDatetime
from sqlalchemy.dialects.postgresql import JSONB

from app.core import fields, limits
from app.core.fields import Fields, Key, Name, Priority, Retries, column, json_object, moment
from app.core.limits import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    DEFAULT_TIMEOUT_SECONDS,
)
from app.handlers.execution_models import ExecutionModel
from app.runs.states import RunStatus


class RunSettingsFields(Fields):
    """How a run runs: shared by runs and the job definitions they are made from."""

    args: dict[str, Any] = json_object("Handler arguments, a JSON object.")
    execution_model: ExecutionModel = column(
        sa.Text,
        default=ExecutionModel.ASYNC,
        server_default=ExecutionModel.ASYNC.value,
        description="Default async.",
    )
    priority: Priority = column(
        sa.SmallInteger,
        default=DEFAULT_PRIORITY,
        server_default=str(DEFAULT_PRIORITY),
        description=f"Higher runs first. Default {DEFAULT_PRIORITY}.",
    )
    timeout_seconds: fields.Duration = column(
        sa.Integer,
        default=DEFAULT_TIMEOUT_SECONDS,
        server_default=str(DEFAULT_TIMEOUT_SECONDS),
        description=f"Default {DEFAULT_TIMEOUT_SECONDS}.",
    )
    max_retries: Retries = column(
        sa.Integer,
        default=DEFAULT_MAX_RETRIES,
        server_default=str(DEFAULT_MAX_RETRIES),
        description=f"Default {DEFAULT_MAX_RETRIES}.",
    )
    queue: Name = column(
        sa.Text,
        default=DEFAULT_QUEUE,
        server_default=DEFAULT_QUEUE,
        description=f"The queue it waits in (workers serve queues). Default {DEFAULT_QUEUE}.",
    )


class RunFields(RunSettingsFields):
    """A run as people see it: what it runs, where it came from, how it went."""

    status: RunStatus = column(sa.Text)
    handler: Name = column(sa.Text)
    run_at: AwareDatetime = moment(nullable=False, now=True)
    # The attempt number, and the run's fencing token: it only ever moves forward.
    attempt: int = column(sa.Integer, default=0, server_default="0")
    crash_count: int = column(
        sa.Integer,
        default=0,
        server_default="0",
        description="Times its worker stopped while running it.",
    )
    quarantined: bool = column(
        sa.Boolean,
        default=False,
        server_default=sa.false(),
        description="Set aside (failed) after too many crashes.",
    )
    idempotency_key: Key | None = column(sa.Text, nullable=True)
    # No foreign keys on the hot table: their per-row trigger cost is a sixth of an insert,
    # and deleting a job or schedule must not rewrite (or lock) its whole run history.
    # A run of a deleted job keeps the id; the dashboard shows it as deleted.
    job_id: uuid.UUID | None = column(sa.Uuid, nullable=True)
    schedule_id: uuid.UUID | None = column(sa.Uuid, nullable=True)
    # The DAG run this run belongs to (all runs of one DAG submit or workflow fire).
    dag_run_id: uuid.UUID | None = column(sa.Uuid, nullable=True)
    # Its step name within the DAG run; downstream steps see its result under this name.
    dag_node: str | None = column(sa.Text, nullable=True)
    cancel_requested: bool = column(sa.Boolean, default=False, server_default=sa.false())
    created_at: datetime = moment(nullable=False, now=True)
    started_at: datetime | None = moment()
    finished_at: datetime | None = moment()
    deadline: AwareDatetime | None = column(
        sa.DateTime(timezone=True),
        nullable=True,
        default=None,
        description="Not started by then, it ends skipped, as expired.",
    )
    last_error: str | None = column(sa.Text, nullable=True)
    result: Any | None = column(JSONB, nullable=True)
    # From inside a job (JobContext.progress and .snooze; see docs/running-work.md).
    progress: float | None = column(
        sa.Float,
        nullable=True,
        description="The latest figure its handler reported (ctx.progress): percent, items "
        "done, ... Cleared when a new attempt starts.",
    )
    progress_message: str | None = column(
        sa.Text,
        nullable=True,
        max_length=limits.MAX_PROGRESS_MESSAGE_LENGTH,
        description="The message of that report, if any.",
    )
    progress_at: datetime | None = column(
        sa.DateTime(timezone=True), nullable=True, description="When that report was stored."
    )
    snooze_count: int = column(
        sa.Integer,
        default=0,
        server_default="0",
        description="Times its handler snoozed (ctx.snooze): put back for later without "
        f"spending an attempt. Past {limits.MAX_SNOOZES:,} it fails.",
    )
    snooze_reason: str | None = column(
        sa.Text,
        nullable=True,
        max_length=limits.MAX_SNOOZE_REASON_LENGTH,
        description="Why it snoozed last, while it waits to run again.",
    )
    snoozed_until: datetime | None = column(
        sa.DateTime(timezone=True),
        nullable=True,
        description="When a snoozed run is due again; cleared when it starts.",
    )


class RunRow(RunFields):
    """A run as the API, the pages and the CLI read it."""

    id: int = column(sa.BigInteger, le=limits.MAX_RUN_ID)


class AttemptFields(Fields):
    """One finished attempt of a run (`job_run_attempts`)."""

    attempt: int = column(sa.Integer, primary_key=True)
    worker: str | None = column(sa.Text, nullable=True)
    outcome: str = column(sa.Text)
    started_at: datetime | None = moment()
    finished_at: datetime = moment(nullable=False, now=True)
    error: str | None = column(sa.Text, nullable=True)


class RunDetailRow(RunRow):
    """A run with the attempts it has finished, oldest first."""

    attempts: list[AttemptFields]
