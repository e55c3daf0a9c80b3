"""The database schema as SQLModel tables.

These classes are the single description of the schema: Alembic migrations are written
against them (a test proves the migrated database matches), and the dashboard reads
through them. Run state changes never go through the ORM; they are the conditional
UPDATEs in `app.runs.transitions`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlmodel import Field, SQLModel

from app.catalog.job_fields import JobFields
from app.catalog.workflow_fields import WorkflowFields, WorkflowStepFields
from app.core import limits
from app.core.fields import moment
from app.core.sql import sql_in
from app.handlers.execution_models import ExecutionModel
from app.people.roles import Role, TokenScope
from app.runs.queues import QueueFields
from app.runs.run_fields import AttemptFields, RunFields
from app.runs.states import RunStatus
from app.scheduling.cron import DstRepeated, DstSkipped
from app.scheduling.fire_decisions import FireOutcome, OverlapPolicy
from app.scheduling.schedule_fields import CalendarFields, FireFields, ScheduleFields

NOW = sa.text("now()")


def _between(expression: str, low: int, high: int, *, nullable: bool = False) -> str:
    check = f"{expression} BETWEEN {low} AND {high}"
    return f"({expression} IS NULL OR {check})" if nullable else check


def _times_supported(*columns: str) -> str:
    """Every instant in these columns lies where every process can load it (see
    app.core.limits: wider than the range people may ask for)."""
    low, high = limits.STORED_EARLIEST, limits.STORED_LATEST
    return " AND ".join(
        f"({c} IS NULL OR ({c} >= '{low}'::timestamptz AND {c} < '{high}'::timestamptz))"
        for c in columns
    )


PRIORITY_RANGE = (-limits.MAX_PRIORITY, limits.MAX_PRIORITY)
DURATION_RANGE = (1, limits.MAX_DURATION_SECONDS)


def _ts(*, nullable: bool = True, now: bool = False, index: bool = False) -> Any:
    """A TIMESTAMPTZ column; `now` gives it the database clock as default."""
    return Field(
        default=None,
        sa_column=sa.Column(
            sa.DateTime(timezone=True),
            nullable=nullable,
            server_default=NOW if now else None,
            index=index,
        ),
    )


def _jsonb(default: str | None) -> Any:
    return Field(
        default=None,
        sa_column=sa.Column(
            JSONB,
            nullable=default is None,
            server_default=sa.text(f"'{default}'::jsonb") if default else None,
        ),
    )


class JobDefinition(JobFields, table=True):
    """A named, reusable job: which handler runs, with what defaults."""

    __tablename__ = "job_definitions"
    __table_args__ = (
        sa.CheckConstraint(
            f"execution_model IN ({sql_in(ExecutionModel)})", name="job_definitions_model"
        ),
        sa.CheckConstraint("timeout_seconds > 0", name="job_definitions_timeout_positive"),
        sa.CheckConstraint("max_retries >= 0", name="job_definitions_retries_nonneg"),
        sa.CheckConstraint(
            _between("priority", *PRIORITY_RANGE), name="job_definitions_priority_range"
        ),
        sa.CheckConstraint(
            _between("timeout_seconds", *DURATION_RANGE), name="job_definitions_timeout_range"
        ),
        sa.CheckConstraint(
            _between("max_retries", 0, limits.MAX_RETRIES), name="job_definitions_retries_range"
        ),
        sa.CheckConstraint(
            _between("max_crashes", 1, limits.MAX_CRASHES), name="job_definitions_crashes_range"
        ),
        sa.CheckConstraint(
            _between("char_length(name)", 1, limits.MAX_NAME_LENGTH),
            name="job_definitions_name_length",
        ),
        sa.CheckConstraint(
            _between("char_length(queue)", 1, limits.MAX_NAME_LENGTH),
            name="job_definitions_queue_length",
        ),
        sa.CheckConstraint(
            f"cardinality(dependencies) <= {limits.MAX_DEPENDENCIES}",
            name="job_definitions_dependencies_count",
        ),
    )

    # Its fields (name, handler and run settings) are JobFields'.
    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    description: str = Field(
        default="", sa_column=sa.Column(sa.Text, nullable=False, server_default="")
    )
    created_at: datetime = moment(nullable=False, now=True)
    updated_at: datetime = moment(nullable=False, now=True)


class ExclusionCalendar(CalendarFields, table=True):
    """Days and windows when the schedules that name this calendar do not run: a country's
    public holidays (whole local days in each schedule's zone) and blackout windows."""

    __tablename__ = "exclusion_calendars"
    __table_args__ = (
        sa.CheckConstraint(
            _between("char_length(name)", 1, limits.MAX_NAME_LENGTH),
            name="exclusion_calendars_name_length",
        ),
        sa.CheckConstraint(
            "subdivision IS NULL OR country IS NOT NULL",
            name="exclusion_calendars_subdivision_needs_country",
        ),
    )

    # Its name, country and subdivision are CalendarFields'.
    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    created_at: datetime = _ts(nullable=False, now=True)
    updated_at: datetime = _ts(nullable=False, now=True)


class BlackoutWindow(SQLModel, table=True):
    """An interval when a calendar's schedules do not run ("quarter close")."""

    __tablename__ = "blackout_windows"
    __table_args__ = (
        sa.CheckConstraint("ends_at > starts_at", name="blackout_windows_end_after_start"),
        sa.CheckConstraint(
            _times_supported("starts_at", "ends_at"), name="blackout_windows_times_supported"
        ),
    )

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    calendar_id: uuid.UUID = Field(
        sa_column=sa.Column(
            sa.Uuid,
            sa.ForeignKey("exclusion_calendars.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        )
    )
    name: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    starts_at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))
    ends_at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))
    # The zone the person entered the times in, to show them back the same way.
    timezone: str = Field(
        default="UTC", sa_column=sa.Column(sa.Text, nullable=False, server_default="UTC")
    )


class Schedule(ScheduleFields, table=True):
    """When a job definition fires: a cron expression or an interval, in a time zone."""

    __tablename__ = "schedules"
    __table_args__ = (
        sa.CheckConstraint(
            "(cron IS NULL) <> (interval_seconds IS NULL)", name="schedules_cron_xor_interval"
        ),
        sa.CheckConstraint(
            "interval_seconds IS NULL OR interval_seconds > 0", name="schedules_interval_positive"
        ),
        sa.CheckConstraint("spread_seconds >= 0", name="schedules_spread_nonneg"),
        sa.CheckConstraint(
            "(job_id IS NULL) <> (workflow_id IS NULL)", name="schedules_job_xor_workflow"
        ),
        sa.CheckConstraint(f"overlap IN ({sql_in(OverlapPolicy)})", name="schedules_overlap"),
        sa.CheckConstraint(f"dst_skipped IN ({sql_in(DstSkipped)})", name="schedules_dst_skipped"),
        sa.CheckConstraint(
            f"dst_repeated IN ({sql_in(DstRepeated)})", name="schedules_dst_repeated"
        ),
        sa.CheckConstraint(
            "catchup_limit IS NULL OR (catchup AND catchup_limit > 0)",
            name="schedules_catchup_limit_positive",
        ),
        sa.CheckConstraint(
            "catchup_window_seconds IS NULL OR catchup_window_seconds > 0",
            name="schedules_catchup_window_positive",
        ),
        sa.CheckConstraint(
            "auto_pause_after IS NULL OR auto_pause_after > 0",
            name="schedules_auto_pause_positive",
        ),
        sa.CheckConstraint(
            _between("interval_seconds", *DURATION_RANGE, nullable=True),
            name="schedules_interval_range",
        ),
        sa.CheckConstraint(
            _between("spread_seconds", 0, limits.MAX_DURATION_SECONDS),
            name="schedules_spread_range",
        ),
        sa.CheckConstraint(
            _between("catchup_limit", 1, limits.MAX_COUNT, nullable=True),
            name="schedules_catchup_limit_range",
        ),
        sa.CheckConstraint(
            _between("catchup_window_seconds", *DURATION_RANGE, nullable=True),
            name="schedules_catchup_window_range",
        ),
        sa.CheckConstraint(
            _between("expire_after_seconds", *DURATION_RANGE, nullable=True),
            name="schedules_expire_after_range",
        ),
        sa.CheckConstraint(
            _between("auto_pause_after", 1, limits.MAX_COUNT, nullable=True),
            name="schedules_auto_pause_range",
        ),
        sa.CheckConstraint(
            _times_supported("start_at", "end_at", "next_fire_time", "paused_until"),
            name="schedules_times_supported",
        ),
        sa.CheckConstraint(
            _between("char_length(name)", 0, limits.MAX_NAME_LENGTH), name="schedules_name_length"
        ),
        sa.CheckConstraint(
            _between("lag_slo_seconds", *DURATION_RANGE, nullable=True),
            name="schedules_lag_slo_range",
        ),
        # The trigger's due query; paused schedules are included (their fires are recorded
        # as paused), ended ones have no next fire.
        sa.Index("ix_schedules_due", "next_fire_time", "id"),
        sa.Index("ix_schedules_name", "name", unique=True, postgresql_where=sa.text("name <> ''")),
        # Each trigger tick: pauses that expire, and schedules that may pause themselves.
        sa.Index(
            "ix_schedules_pause_expiry",
            "paused_until",
            postgresql_where=sa.text("paused_until IS NOT NULL"),
        ),
        sa.Index(
            "ix_schedules_auto_pause",
            "id",
            postgresql_where=sa.text("auto_pause_after IS NOT NULL"),
        ),
        # Cascades from job definitions and workflows. Partial: moving a schedule's next
        # fire writes an entry in every index a row is in, and it is in one of these two.
        sa.Index("ix_schedules_job_id", "job_id", postgresql_where=sa.text("job_id IS NOT NULL")),
        sa.Index(
            "ix_schedules_workflow_id",
            "workflow_id",
            postgresql_where=sa.text("workflow_id IS NOT NULL"),
        ),
        sa.Index(
            "ix_schedules_calendar_id",
            "calendar_id",
            postgresql_where=sa.text("calendar_id IS NOT NULL"),
        ),
        # The lag page: schedules with a threshold, by name (a few among thousands).
        sa.Index(
            "ix_schedules_lag_slo",
            "name",
            postgresql_where=sa.text("lag_slo_seconds IS NOT NULL"),
        ),
    )

    # Its rule, name, next fire and pause are ScheduleFields'.
    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    # What fires: a job definition, or a workflow (each fire is then one DAG run).
    job_id: uuid.UUID | None = Field(
        default=None,
        sa_column=sa.Column(
            sa.Uuid,
            sa.ForeignKey("job_definitions.id", ondelete="CASCADE"),
            nullable=True,
            index=True,
        ),
    )
    workflow_id: uuid.UUID | None = Field(
        default=None,
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("workflows.id", ondelete="CASCADE"), nullable=True, index=True
        ),
    )
    # Fires on its holidays or in its blackout windows are recorded as `excluded`.
    calendar_id: uuid.UUID | None = Field(
        default=None,
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("exclusion_calendars.id", ondelete="SET NULL"), nullable=True
        ),
    )
    active: bool = Field(
        default=True, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.true())
    )
    paused_note: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    paused_at: datetime | None = _ts()
    resumed_at: datetime | None = _ts()
    # The job definition was created with this schedule and is deleted with it.
    owns_job: bool = Field(
        default=False, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false())
    )
    # Lag SLO: a run starting more than this long after its fire is an alert (NULL: none).
    lag_slo_seconds: int | None = Field(
        default=None, sa_column=sa.Column(sa.Integer, nullable=True)
    )
    created_at: datetime = _ts(nullable=False, now=True)
    updated_at: datetime = _ts(nullable=False, now=True)


class JobRun(RunFields, table=True):
    """One execution request and its current state. The hot table.

    A run carries its own handler, args and limits (copied from its job definition when
    it has one), so claiming and executing it never needs a join.
    """

    __tablename__ = "job_runs"
    __table_args__ = (
        sa.CheckConstraint(f"status IN ({sql_in(RunStatus)})", name="job_runs_status"),
        sa.CheckConstraint(
            _between("char_length(queue)", 1, limits.MAX_NAME_LENGTH), name="job_runs_queue_length"
        ),
        sa.CheckConstraint(f"execution_model IN ({sql_in(ExecutionModel)})", name="job_runs_model"),
        sa.CheckConstraint("attempt >= 0", name="job_runs_attempt_nonneg"),
        sa.CheckConstraint("timeout_seconds > 0", name="job_runs_timeout_positive"),
        sa.CheckConstraint("max_retries >= 0", name="job_runs_retries_nonneg"),
        sa.CheckConstraint("upstream_remaining >= 0", name="job_runs_upstream_nonneg"),
        sa.CheckConstraint(
            _between("priority", *PRIORITY_RANGE)
            + " AND "
            + _between("base_priority", *PRIORITY_RANGE),
            name="job_runs_priority_range",
        ),
        sa.CheckConstraint(
            _between("timeout_seconds", *DURATION_RANGE), name="job_runs_timeout_range"
        ),
        sa.CheckConstraint(
            _between("max_retries", 0, limits.MAX_RETRIES), name="job_runs_retries_range"
        ),
        sa.CheckConstraint(
            _times_supported(
                "run_at", "fire_time", "lease_until", "started_at", "finished_at", "created_at"
            ),
            name="job_runs_times_supported",
        ),
        sa.CheckConstraint(_times_supported("deadline"), name="job_runs_deadline_supported"),
        # NaN sorts above Infinity in PostgreSQL, so `< 'Infinity'` refuses both.
        sa.CheckConstraint(
            "progress IS NULL OR "
            "(progress > '-Infinity'::float8 AND progress < 'Infinity'::float8)",
            name="job_runs_progress_finite",
        ),
        sa.CheckConstraint(
            f"(progress_message IS NULL OR char_length(progress_message) <= "
            f"{limits.MAX_PROGRESS_MESSAGE_LENGTH}) AND (snooze_reason IS NULL OR "
            f"char_length(snooze_reason) <= {limits.MAX_SNOOZE_REASON_LENGTH})",
            name="job_runs_snooze_text_length",
        ),
        sa.CheckConstraint("snooze_count >= 0", name="job_runs_snooze_count_nonneg"),
        sa.CheckConstraint(
            _times_supported("progress_at", "snoozed_until"),
            name="job_runs_snooze_times_supported",
        ),
        # A running run is always leased (the reaper frees it when the lease expires), and
        # a blocked one always waits for an upstream (the last one to complete releases it).
        sa.CheckConstraint(
            "status <> 'running' OR (lease_owner IS NOT NULL AND lease_until IS NOT NULL)",
            name="job_runs_running_leased",
        ),
        sa.CheckConstraint(
            "status <> 'blocked' OR upstream_remaining > 0", name="job_runs_blocked_waits"
        ),
        # The seed's UNIQUE(schedule_id, fire_time) and UNIQUE(idempotency_key), as partial
        # unique indexes: NULLs never collide anyway, and one-shot runs without a key then
        # cost no index entries on insert (bulk submit rate).
        sa.Index(
            "job_runs_schedule_fire_time",
            "schedule_id",
            "fire_time",
            unique=True,
            # The steps of a workflow fire share it; their DAG run is unique per fire instead.
            postgresql_where=sa.text("schedule_id IS NOT NULL AND dag_run_id IS NULL"),
        ),
        sa.Index(
            "job_runs_idempotency_key",
            "idempotency_key",
            unique=True,
            postgresql_where=sa.text("idempotency_key IS NOT NULL"),
        ),
        # Dispatch: only pending rows, in claim order; finished rows drop out.
        sa.Index(
            "ix_job_runs_dispatch",
            "queue",
            sa.text("priority DESC"),
            "run_at",
            postgresql_where=sa.text("status = 'pending'"),
        ),
        # Reaper: leases that may have expired.
        sa.Index(
            "ix_job_runs_lease", "lease_until", postgresql_where=sa.text("status = 'running'")
        ),
        # Reaper: runs whose deadline may have passed before they started.
        sa.Index(
            "ix_job_runs_expiring",
            "deadline",
            postgresql_where=sa.text("status = 'pending' AND deadline IS NOT NULL"),
        ),
        # History of a job definition's runs, newest first (ids grow with time).
        sa.Index("ix_job_runs_job", "job_id", "id", postgresql_where=sa.text("job_id IS NOT NULL")),
        # The trigger's overlap check: a schedule's runs that are still active.
        sa.Index(
            "ix_job_runs_schedule_active",
            "schedule_id",
            postgresql_where=sa.text(
                "schedule_id IS NOT NULL AND status IN ('pending', 'blocked', 'running')"
            ),
        ),
        # All runs of a DAG run.
        sa.Index(
            "ix_job_runs_dag_run", "dag_run_id", postgresql_where=sa.text("dag_run_id IS NOT NULL")
        ),
        # Dead letters, newest first; the reaper prunes the oldest past their retention.
        sa.Index(
            "ix_job_runs_dead_letters",
            "finished_at",
            postgresql_where=sa.text("status IN ('failed', 'timed_out')"),
        ),
        # Dead letters grouped by error fingerprint (app.runs.dead_letters), index-only.
        sa.Index(
            "ix_job_runs_dead_letter_groups",
            "error_fingerprint",
            "finished_at",
            postgresql_where=sa.text("status IN ('failed', 'timed_out')"),
        ),
        # The other ended runs, which the reaper prunes past their retention.
        sa.Index(
            "ix_job_runs_ended",
            "finished_at",
            postgresql_where=sa.text("status IN ('completed', 'cancelled', 'skipped')"),
        ),
        # The runs page filtered by status, newest first, and the overview's counts, for the
        # statuses no other index holds apart. Pending, running and completed runs take no
        # entry here: every one of them passes through those states, and each entry is a
        # write on the claim-and-finish path (pending and running runs are recent,
        # completed ones the bulk of the history).
        sa.Index(
            "ix_job_runs_rare_status",
            "status",
            "id",
            postgresql_where=sa.text("status IN ('failed', 'timed_out', 'cancelled', 'skipped')"),
        ),
        # The runs page searching error texts: only runs that have one, newest first.
        sa.Index("ix_job_runs_errors", "id", postgresql_where=sa.text("last_error IS NOT NULL")),
        # The runs page filtered by schedule, newest first.
        sa.Index(
            "ix_job_runs_schedule_id",
            "schedule_id",
            "id",
            postgresql_where=sa.text("schedule_id IS NOT NULL"),
        ),
        # /metrics counts blocked runs (DAG steps waiting) without scanning the table.
        sa.Index("ix_job_runs_blocked", "id", postgresql_where=sa.text("status = 'blocked'")),
        # The runs list searching what ended runs carried (`args @> '{"customer_id": 42}'`,
        # app.runs.run_search); jsonb_path_ops: containment only, one small key per value.
        # Ended runs only: one entry per run, at its finish, not also at its submit and
        # claim; waiting and running runs are found through the dispatch, lease and blocked
        # indexes above. No pending list (fastupdate): every finishing worker would append
        # to that one list under one lock. Both choices: docs/benchmarks.md.
        sa.Index(
            "ix_job_runs_args",
            "args",
            postgresql_using="gin",
            postgresql_ops={"args": "jsonb_path_ops"},
            postgresql_with={"fastupdate": "off"},
            postgresql_where=sa.text(
                "status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')"
            ),
        ),
    )

    # The fields people see (what it runs, where from, how it went) are RunFields'; these
    # are the machinery's.
    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    fire_time: datetime | None = _ts()
    # Upstreams not yet completed; the finish that brings it to 0 releases the run.
    # A counter updated under the row lock, so two upstreams finishing at once can't both
    # believe the other is still running.
    upstream_remaining: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    base_priority: int = Field(
        default=1, sa_column=sa.Column(sa.SmallInteger, nullable=False, server_default="1")
    )
    # The attempt number the current retry budget counts from: `attempt - retry_base` is
    # checked against `max_retries`. A stopping worker's hand-back and a manual retry raise
    # it, so `attempt` (the fencing token) only ever moves forward.
    retry_base: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    # Crash accounting (see the reaper's run_reap). `began_attempt` is the last attempt whose
    # handler began: an expired lease with a later `attempt` was claimed but never started,
    # and goes back to the queue for free. A began attempt whose worker died is a crash,
    # counted in `crash_count` instead of the retry budget; a run that crashed is a suspect
    # and runs alone on its worker, in a process of its own. That process dying, seen by
    # the living worker (`lone_crashes`), is the evidence: at its job's `max_crashes` of
    # those it is quarantined (failed); see run_crash_many.
    began_attempt: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    lone_crashes: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    lease_owner: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    lease_until: datetime | None = _ts()
    traceback: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    skip_reason: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    # Exception class + normalised message + top frame of the last error, hashed
    # (app.runs.fingerprints): set by the failing transition, so dead letters group by index.
    error_fingerprint: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))


class JobRunAttempt(AttemptFields, table=True):
    """History: one row per finished attempt of a run, with its outcome and error.

    No foreign key to job_runs: it is written in the same statement as the run's finish,
    where the key check would cost a third of the statement. Pruning deletes both.
    """

    __tablename__ = "job_run_attempts"
    __table_args__ = (
        # Attempts whose worker died (lease expired) or handed them back: the overview's
        # lease-expiry alert and the workers page, over the last hour.
        sa.Index(
            "ix_job_run_attempts_lost",
            "finished_at",
            postgresql_where=sa.text("outcome IN ('lost', 'released')"),
        ),
        # /metrics: lease expiries are the reaper's `lost` attempts, a small set, counted
        # with the re-queued ones index-only.
        sa.Index(
            "ix_job_run_attempts_lost_requeued",
            "requeued",
            postgresql_where=sa.text("outcome = 'lost'"),
        ),
    )

    # attempt, worker, outcome, times and error are AttemptFields'.
    run_id: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True))
    traceback: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    # Set by the reaper on the `lost` attempts it records: true when it put the run back
    # in the queue, false when the lost attempt ended the run.
    requeued: bool | None = Field(default=None, sa_column=sa.Column(sa.Boolean, nullable=True))


class JobRunDep(SQLModel, table=True):
    """A DAG edge: `run_id` may start only after `depends_on` completed."""

    __tablename__ = "job_run_deps"
    __table_args__ = (sa.Index("ix_job_run_deps_depends_on", "depends_on"),)

    run_id: int = Field(
        sa_column=sa.Column(
            sa.BigInteger, sa.ForeignKey("job_runs.id", ondelete="CASCADE"), primary_key=True
        )
    )
    depends_on: int = Field(
        sa_column=sa.Column(
            sa.BigInteger, sa.ForeignKey("job_runs.id", ondelete="CASCADE"), primary_key=True
        )
    )


class Worker(SQLModel, table=True):
    """A worker process as it last reported itself: liveness, handlers and load."""

    __tablename__ = "workers"

    id: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    host: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    pid: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    concurrency: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    started_at: datetime = _ts(nullable=False, now=True)
    last_seen: datetime = _ts(nullable=False, now=True, index=True)
    stopped_at: datetime | None = _ts()
    handlers: list[str] = _jsonb("[]")
    # handler name -> JSON schema of the args it declares (only handlers that declare);
    # json, not jsonb, so properties keep their declared order (the form's order)
    handler_args: dict[str, Any] = Field(
        default=None,
        sa_column=sa.Column(sa.JSON, nullable=False, server_default=sa.text("'{}'::json")),
    )
    stats: dict[str, Any] = _jsonb("{}")


class LeaderLease(SQLModel, table=True):
    """Who leads a singleton role (the trigger) until when; `term` fences old leaders."""

    __tablename__ = "leader_leases"

    name: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    holder: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    term: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    acquired_at: datetime = _ts(nullable=False, now=True)
    lease_until: datetime = _ts(nullable=False)


class User(SQLModel, table=True):
    """A person who signs in to the dashboard, with a role."""

    __tablename__ = "users"
    __table_args__ = (sa.CheckConstraint(f"role IN ({sql_in(Role)})", name="users_role"),)

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    username: str = Field(sa_column=sa.Column(sa.Text, nullable=False, unique=True))
    password_hash: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    role: str = Field(
        default=Role.VIEWER.value,
        sa_column=sa.Column(sa.Text, nullable=False, server_default=Role.VIEWER.value),
    )
    api_token_hash: str | None = Field(
        default=None, sa_column=sa.Column(sa.Text, nullable=True, unique=True)
    )
    disabled: bool = Field(
        default=False, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false())
    )
    created_at: datetime = _ts(nullable=False, now=True)


class WebSession(SQLModel, table=True):
    """A signed-in browser. The cookie holds a random token; the row is keyed by its HMAC
    under SECRET_KEY, so rows read from the database cannot be replayed as cookies."""

    __tablename__ = "web_sessions"

    id: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    user_id: int = Field(
        sa_column=sa.Column(
            sa.BigInteger,
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        )
    )
    created_at: datetime = _ts(nullable=False, now=True)
    expires_at: datetime = _ts(nullable=False, index=True)


class SignInLink(SQLModel, table=True):
    """A one-time sign-in link (`sundial dev`): keyed like a session, used once."""

    __tablename__ = "sign_in_links"

    id: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    user_id: int = Field(
        sa_column=sa.Column(
            sa.BigInteger,
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        )
    )
    expires_at: datetime = _ts(nullable=False)


class LoginFailure(SQLModel, table=True):
    """A failed sign-in, counted per user name and address to slow password guessing."""

    __tablename__ = "login_failures"
    __table_args__ = (sa.Index("ix_login_failures_key", "username", "address", "at"),)

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    username: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    address: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    at: datetime = _ts(nullable=False, now=True)


class AuditEntry(SQLModel, table=True):
    """Who changed what, when: every change a person makes through Sundial."""

    __tablename__ = "audit_log"
    # A thing's version history, newest first (app.people.versions).
    __table_args__ = (sa.Index("ix_audit_log_subject", "target_type", "subject_id", "id"),)

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    at: datetime = _ts(nullable=False, now=True, index=True)
    actor: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    action: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    target_type: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    # The target's name when the change was made, as a person reads it.
    target_id: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    # The target's stable id (a job, schedule or workflow keeps it through a rename; one
    # created again under an old name gets a new one): what its version history is keyed by.
    subject_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid, nullable=True))
    details: dict[str, Any] = _jsonb("{}")


class ScheduleFire(FireFields, table=True):
    """The fire ledger: one row per intended fire of a schedule and what became of it, so
    "did my 02:30 job fire last night, and if not, why" always has an answer."""

    __tablename__ = "schedule_fires"
    __table_args__ = (
        sa.CheckConstraint(f"outcome IN ({sql_in(FireOutcome)})", name="schedule_fires_outcome"),
        sa.CheckConstraint("coalesced_count >= 0", name="schedule_fires_coalesced_nonneg"),
        sa.CheckConstraint(_times_supported("fire_time"), name="schedule_fires_times_supported"),
        # The trigger looks for queued fires whose blocking run has ended, every tick.
        sa.Index(
            "ix_schedule_fires_queued",
            "schedule_id",
            postgresql_where=sa.text("outcome = 'queued'"),
        ),
        # /metrics: recent fires by outcome. Fire times grow with insertion, so BRIN costs
        # the trigger's inserts next to nothing.
        # autosummarize: new page ranges are summarised as they fill, not at the next vacuum.
        # A backfill's fires and their runs (progress, cancel, the concurrency cap).
        sa.Index(
            "ix_schedule_fires_backfill",
            "backfill_id",
            postgresql_where=sa.text("backfill_id IS NOT NULL"),
        ),
        sa.Index(
            "ix_schedule_fires_fire_time_brin",
            "fire_time",
            postgresql_using="brin",
            postgresql_with={"autosummarize": "on"},
        ),
    )

    # The fire's time, outcome and run are FireFields'.
    # No foreign key (it cost the trigger's inserts dearly): the statement trigger
    # `schedules_delete_fires` (migration 0004) deletes a schedule's ledger with it.
    schedule_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    # On the fire that ran after downtime: how many earlier missed fires it stands for.
    coalesced_count: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    manual: bool = Field(
        default=False, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false())
    )
    recorded_at: datetime = _ts(nullable=False, now=True)
    updated_at: datetime = _ts(nullable=False, now=True)
    # The backfill that ran this fire (`backfills`), when one did; NULL for the trigger's
    # own fires and "run now".
    backfill_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid, nullable=True))


class Backfill(SQLModel, table=True):
    """A schedule's fires over a past range, run on request (`app.scheduling.backfills`):
    the trigger submits them oldest first while fewer than `concurrency` of its runs are
    pending or running; each fire gets a ledger row marked with the backfill."""

    __tablename__ = "backfills"
    __table_args__ = (
        sa.CheckConstraint("status IN ('running', 'done', 'cancelled')", name="backfills_status"),
        sa.CheckConstraint("range_end >= range_start", name="backfills_range"),
        sa.CheckConstraint(
            _between("concurrency", 1, limits.MAX_BACKFILL_CONCURRENCY),
            name="backfills_concurrency_range",
        ),
        sa.CheckConstraint("fire_count >= 0 AND left_alone >= 0", name="backfills_counts_nonneg"),
        # The schedule page's backfills, newest first.
        sa.Index("ix_backfills_schedule", "schedule_id", "created_at"),
        # The trigger feeds the running ones, every tick.
        sa.Index("ix_backfills_running", "id", postgresql_where=sa.text("status = 'running'")),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    schedule_id: uuid.UUID = Field(
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("schedules.id", ondelete="CASCADE"), nullable=False
        )
    )
    # The range asked for, both ends included.
    range_start: datetime = _ts(nullable=False)
    range_end: datetime = _ts(nullable=False)
    # Fires at or after this instant are still to submit; past `range_end`: all submitted.
    next_from: datetime = _ts(nullable=False)
    concurrency: int = Field(
        default=1, sa_column=sa.Column(sa.Integer, nullable=False, server_default="1")
    )
    # Fires it runs, and fires of the range it leaves alone (already in the ledger).
    fire_count: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    left_alone: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    status: str = Field(
        default="running", sa_column=sa.Column(sa.Text, nullable=False, server_default="running")
    )
    created_by: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    created_at: datetime = _ts(nullable=False, now=True)
    ended_at: datetime | None = _ts()


class Workflow(WorkflowFields, table=True):
    """A named, reusable DAG over job definitions: its steps and the edges between them."""

    __tablename__ = "workflows"
    __table_args__ = (
        sa.CheckConstraint(
            _between("char_length(name)", 1, limits.MAX_NAME_LENGTH), name="workflows_name_length"
        ),
    )

    # Its name and description are WorkflowFields'.
    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    created_at: datetime = _ts(nullable=False, now=True)
    updated_at: datetime = _ts(nullable=False, now=True)


class WorkflowStep(WorkflowStepFields, table=True):
    """A step of a workflow: a job definition, with args merged over the job's own."""

    __tablename__ = "workflow_steps"

    workflow_id: uuid.UUID = Field(
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("workflows.id", ondelete="CASCADE"), primary_key=True
        )
    )
    name: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    # A job used by a workflow cannot be deleted from under it.
    job_id: uuid.UUID = Field(
        sa_column=sa.Column(
            sa.Uuid,
            sa.ForeignKey("job_definitions.id", ondelete="RESTRICT"),
            nullable=False,
            index=True,
        )
    )
    # Its args are WorkflowStepFields'.


class WorkflowEdge(SQLModel, table=True):
    """`downstream` starts only after `upstream` completed, in every run of the workflow."""

    __tablename__ = "workflow_edges"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["workflow_id", "upstream"],
            ["workflow_steps.workflow_id", "workflow_steps.name"],
            ondelete="CASCADE",
            onupdate="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workflow_id", "downstream"],
            ["workflow_steps.workflow_id", "workflow_steps.name"],
            ondelete="CASCADE",
            onupdate="CASCADE",
        ),
        sa.CheckConstraint("upstream <> downstream", name="workflow_edges_not_self"),
    )

    workflow_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    upstream: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    downstream: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))


class DagRun(SQLModel, table=True):
    """One run of a DAG: submitted directly, or a workflow's fire (unique per fire time)."""

    __tablename__ = "dag_runs"
    __table_args__ = (
        sa.CheckConstraint(_times_supported("fire_time"), name="dag_runs_times_supported"),
        sa.Index(
            "dag_runs_schedule_fire_time",
            "schedule_id",
            "fire_time",
            unique=True,
            postgresql_where=sa.text("schedule_id IS NOT NULL"),
        ),
        sa.Index("ix_dag_runs_created", "created_at"),
        sa.Index(
            "ix_dag_runs_workflow",
            "workflow_id",
            "created_at",
            postgresql_where=sa.text("workflow_id IS NOT NULL"),
        ),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    name: str = Field(default="", sa_column=sa.Column(sa.Text, nullable=False, server_default=""))
    # Kept when the workflow or schedule is deleted: this is history.
    workflow_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid, nullable=True))
    schedule_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid, nullable=True))
    fire_time: datetime | None = _ts()
    created_at: datetime = _ts(nullable=False, now=True)


class FleetSetting(SQLModel, table=True):
    """A decision that holds for every process at once (e.g. whether `shell` may run),
    set by an admin command and read where runs are submitted and executed."""

    __tablename__ = "fleet_settings"

    name: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    value: Any = Field(sa_column=sa.Column(JSONB, nullable=False))
    updated_at: datetime = _ts(nullable=False, now=True)


class ApiToken(SQLModel, table=True):
    """A bearer token for the JSON API: acts as its user, limited to its scope. Only the
    SHA-256 of the secret is kept (the secret is 32 random bytes, shown once)."""

    __tablename__ = "api_tokens"
    __table_args__ = (
        sa.CheckConstraint(f"scope IN ({sql_in(TokenScope)})", name="api_tokens_scope"),
    )

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    user_id: int = Field(
        sa_column=sa.Column(
            sa.BigInteger,
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        )
    )
    name: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    token_hash: str = Field(sa_column=sa.Column(sa.Text, nullable=False, unique=True))
    # The first characters of the token, so a person can tell their tokens apart.
    prefix: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    scope: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    created_by: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    created_at: datetime = _ts(nullable=False, now=True)
    expires_at: datetime | None = _ts()
    last_used_at: datetime | None = _ts()
    revoked_at: datetime | None = _ts()


class DeadLetterResolution(SQLModel, table=True):
    """A person resolved or discarded a group of dead letters (one error fingerprint):
    its runs that failed up to `through` leave the triage page; later failures reopen it."""

    __tablename__ = "dead_letter_resolutions"
    __table_args__ = (
        sa.CheckConstraint(
            "action IN ('resolved', 'discarded')", name="dead_letter_resolutions_action"
        ),
        sa.CheckConstraint(
            "char_length(reason) BETWEEN 1 AND 2000", name="dead_letter_resolutions_reason"
        ),
        sa.Index("ix_dead_letter_resolutions_fingerprint", "fingerprint", "through"),
    )

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    fingerprint: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    action: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    reason: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    actor: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    runs: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    through: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))
    at: datetime = _ts(nullable=False, now=True, index=True)


class RunLog(SQLModel, table=True):
    """A line a run's handler logged or printed, per attempt, in order (app.runs.run_logs).
    No foreign key, like every reference to the hot table: the worker appends in batches."""

    __tablename__ = "run_logs"
    __table_args__ = (
        sa.CheckConstraint("stream IN ('log', 'stdout', 'stderr')", name="run_logs_stream"),
    )

    run_id: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True))
    attempt: int = Field(sa_column=sa.Column(sa.Integer, primary_key=True))
    seq: int = Field(sa_column=sa.Column(sa.Integer, primary_key=True))
    at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))
    stream: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    line: str = Field(sa_column=sa.Column(sa.Text, nullable=False))


class JobStatHour(SQLModel, table=True):
    """Per-job statistics roll-up (app.observability.job_stats): one clock hour of a job's run
    endings, by `finished_at`, filled once the minutes it covers have closed. `job_key` is the job
    definition's id, or the nil UUID for runs submitted without one."""

    __tablename__ = "job_stat_hours"
    __table_args__ = (sa.Index("ix_job_stat_hours_hour", "hour"),)

    job_key: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    handler: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    hour: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), primary_key=True))
    runs: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    completed: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    failures: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    retries: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    # Shortest and longest duration: percentiles read from the histogram are clamped to them.
    shortest: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))
    longest: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))


class JobStatDuration(SQLModel, table=True):
    """The duration histogram of a `job_stat_hours` row: how many runs took a duration in
    log-scale bucket `bucket` (app.observability.job_stats.bucket_of); only the buckets that
    occur."""

    __tablename__ = "job_stat_durations"
    __table_args__ = (sa.Index("ix_job_stat_durations_hour", "hour"),)

    job_key: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    handler: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    hour: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), primary_key=True))
    bucket: int = Field(sa_column=sa.Column(sa.SmallInteger, primary_key=True))
    n: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))


class JobStatWindow(SQLModel, table=True):
    """Per job, the `job_stat_hours` of the window summed, with its percentiles: what the
    statistics page sorts and shows, one row per job however many runs it had."""

    __tablename__ = "job_stat_window"
    __table_args__ = (
        # The page's three orders, read down an index: the first rows, not a sort of all.
        sa.Index(
            "ix_job_stat_window_failing",
            sa.text("failure_rate DESC"),
            sa.text("failures DESC"),
            "name",
        ),
        sa.Index(
            "ix_job_stat_window_slowest",
            sa.text("p95 DESC NULLS LAST"),
            sa.text("failure_rate DESC"),
            sa.text("failures DESC"),
            "name",
        ),
        sa.Index(
            "ix_job_stat_window_busiest",
            sa.text("runs DESC"),
            sa.text("failure_rate DESC"),
            sa.text("failures DESC"),
            "name",
        ),
    )

    job_key: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    handler: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    # The job's name (or handler) when its row was last filled: the order's tie-break.
    name: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    runs: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    completed: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    failures: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    retries: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    failure_rate: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    p50: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))
    p95: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))


class JobStatState(SQLModel, table=True):
    """How far the roll-up is filled: endings before `through` (a minute boundary) are in
    it; `window_start` is the first hour the window sums. One row, locked by the filler."""

    __tablename__ = "job_stat_state"
    __table_args__ = (sa.CheckConstraint("id = 1", name="job_stat_state_one_row"),)

    id: int = Field(sa_column=sa.Column(sa.SmallInteger, primary_key=True))
    through: datetime | None = _ts()
    window_start: datetime | None = _ts()


class Queue(QueueFields, table=True):
    """A named queue's fleet-wide settings: whether it is paused, by whom and why. A queue
    without a row here is open (runs name their queue; `default` unless given)."""

    __tablename__ = "queues"
    __table_args__ = (
        sa.CheckConstraint(
            _between("char_length(name)", 1, limits.MAX_NAME_LENGTH), name="queues_name_length"
        ),
        sa.CheckConstraint(
            _between("max_running", 1, limits.MAX_COUNT, nullable=True),
            name="queues_max_running_range",
        ),
        sa.CheckConstraint(
            _between("key_max_running", 1, limits.MAX_COUNT, nullable=True),
            name="queues_key_max_running_range",
        ),
        sa.CheckConstraint(
            _between("char_length(key_field)", 1, limits.MAX_NAME_LENGTH, nullable=True),
            name="queues_key_field_length",
        ),
        # A per-key limit needs the field its keys come from; that field serves a per-key
        # limit or a rate per key, and a rate per key needs a rate.
        sa.CheckConstraint(
            "key_max_running IS NULL OR key_field IS NOT NULL", name="queues_key_limit_keyed"
        ),
        sa.CheckConstraint(
            "(key_field IS NULL) = "
            "(key_max_running IS NULL AND NOT rate_per_key AND NOT fair_share)",
            name="queues_key_field_used",
        ),
        sa.CheckConstraint(
            "NOT rate_per_key OR rate_limit IS NOT NULL", name="queues_rate_per_key_rated"
        ),
        sa.CheckConstraint(
            _between("rate_limit", 1, limits.MAX_COUNT, nullable=True),
            name="queues_rate_limit_range",
        ),
        sa.CheckConstraint(
            _between("rate_period_seconds", *DURATION_RANGE, nullable=True),
            name="queues_rate_period_range",
        ),
        sa.CheckConstraint(
            _between("rate_burst", 1, limits.MAX_COUNT, nullable=True),
            name="queues_rate_burst_range",
        ),
        # a rate is a number of starts and its period, and its burst belongs to it
        sa.CheckConstraint(
            "(rate_limit IS NULL) = (rate_period_seconds IS NULL) "
            "AND (rate_limit IS NULL) = (rate_burst IS NULL)",
            name="queues_rate_whole",
        ),
        sa.CheckConstraint(
            "jsonb_typeof(key_weights) = 'object'", name="queues_key_weights_object"
        ),
    )

    # Its name, pause and limits are QueueFields'.
    updated_at: datetime = _ts(nullable=False, now=True)
    # Whether any limit is set: the plain claims leave such a queue to the limited claim.
    limited: bool | None = Field(
        default=None,
        sa_column=sa.Column(
            sa.Boolean,
            sa.Computed(
                "max_running IS NOT NULL OR key_max_running IS NOT NULL OR rate_limit IS NOT NULL"
                " OR fair_share",
                persisted=True,
            ),
        ),
    )
    # The rate limit's bucket: the starts left at that moment (refilled as time passes).
    rate_tokens: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))
    rate_tokens_at: datetime | None = _ts()


class QueueKeyRate(SQLModel, table=True):
    """A key's rate bucket, for a queue whose rate applies to each key: the starts it had
    left at `at`. A key without a row has a full bucket; the reaper drops refilled rows."""

    __tablename__ = "queue_key_rates"

    queue: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    key: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    tokens: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))


class QueueFairTurn(SQLModel, table=True):
    """A fairly shared queue's due runs in turn order, as its claims last read them: each
    claim takes its runs off the front, and reads them afresh once `read_at` is a second
    old (`app.runs.fair_turns`)."""

    __tablename__ = "queue_fair_turns"

    queue: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    ids: list[int] = Field(sa_column=sa.Column(ARRAY(sa.BigInteger), nullable=False))
    keys: list[str | None] = Field(sa_column=sa.Column(ARRAY(sa.Text), nullable=False))
    suspects: list[bool] = Field(sa_column=sa.Column(ARRAY(sa.Boolean), nullable=False))
    read_at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))


class Dependency(SQLModel, table=True):
    """A service that job definitions name as called by their runs, with its circuit
    breaker: settings, and state (closed, open, half_open) as `app.runs.breakers` keeps it."""

    __tablename__ = "dependencies"
    __table_args__ = (
        sa.CheckConstraint(
            _between("char_length(name)", 1, limits.MAX_NAME_LENGTH),
            name="dependencies_name_length",
        ),
        sa.CheckConstraint("state IN ('closed', 'open', 'half_open')", name="dependencies_state"),
        sa.CheckConstraint(
            "failure_threshold > 0 AND failure_threshold <= 1",
            name="dependencies_failure_threshold_range",
        ),
        sa.CheckConstraint(
            _between("min_calls", 1, limits.MAX_COUNT), name="dependencies_min_calls_range"
        ),
        sa.CheckConstraint(_between("window_seconds", 1, 86400), name="dependencies_window_range"),
        sa.CheckConstraint(
            _between("cool_off_seconds", 1, 86400), name="dependencies_cool_off_range"
        ),
        sa.CheckConstraint(_between("probes", 1, 1000), name="dependencies_probes_range"),
        sa.CheckConstraint(
            "retry_budget IS NULL OR retry_budget BETWEEN 0 AND 1",
            name="dependencies_retry_budget_range",
        ),
        sa.CheckConstraint(
            _between("retry_window_seconds", 1, 86400), name="dependencies_retry_window_range"
        ),
        sa.CheckConstraint(
            "state <> 'open' OR manual OR reopen_at IS NOT NULL", name="dependencies_open_until"
        ),
    )

    name: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    failure_threshold: float = Field(
        default=0.5, sa_column=sa.Column(sa.Float, nullable=False, server_default="0.5")
    )
    min_calls: int = Field(
        default=5, sa_column=sa.Column(sa.Integer, nullable=False, server_default="5")
    )
    window_seconds: int = Field(
        default=60, sa_column=sa.Column(sa.Integer, nullable=False, server_default="60")
    )
    cool_off_seconds: int = Field(
        default=30, sa_column=sa.Column(sa.Integer, nullable=False, server_default="30")
    )
    probes: int = Field(
        default=3, sa_column=sa.Column(sa.Integer, nullable=False, server_default="3")
    )
    retry_budget: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))
    retry_window_seconds: int = Field(
        default=300, sa_column=sa.Column(sa.Integer, nullable=False, server_default="300")
    )
    state: str = Field(
        default="closed", sa_column=sa.Column(sa.Text, nullable=False, server_default="closed")
    )
    state_since: datetime = _ts(nullable=False, now=True)
    reopen_at: datetime | None = _ts()
    probe_runs: list[int] = Field(
        default_factory=list,
        sa_column=sa.Column(
            ARRAY(sa.BigInteger), nullable=False, server_default=sa.text("'{}'::bigint[]")
        ),
    )
    manual: bool = Field(
        default=False, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false())
    )
    retries_held: bool = Field(
        default=False, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false())
    )
    changed_by: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    note: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    settings_by: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    settings_at: datetime | None = _ts()


class DependencyCall(SQLModel, table=True):
    """How one attempt of a run calling a dependency ended (ok or not, and whether it was
    a retry), kept over the dependency's longest window for its breaker and retry budget."""

    __tablename__ = "dependency_calls"
    __table_args__ = (sa.Index("ix_dependency_calls_at", "dependency", "at"),)

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    dependency: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))
    ok: bool = Field(sa_column=sa.Column(sa.Boolean, nullable=False))
    retry: bool = Field(sa_column=sa.Column(sa.Boolean, nullable=False))


class BulkAction(SQLModel, table=True):
    """Cancel, retry or re-run of many runs at once (`app.runs.bulk_actions`): what was
    asked (the runs list's filter, or the ticked runs), by whom, and how far it got. Each
    batch of runs moves and advances `cursor_id` and the counts in one transaction, so a
    web process that dies mid-way leaves the exact place to resume from; the process
    working on it holds `lease_until`, and another takes it over once that has passed."""

    __tablename__ = "bulk_actions"
    __table_args__ = (
        sa.CheckConstraint("action IN ('cancel', 'retry', 'rerun')", name="bulk_actions_action"),
        sa.CheckConstraint("status IN ('running', 'finished')", name="bulk_actions_status"),
        sa.Index("ix_bulk_actions_recent", "created_at"),
    )

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    action: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    actor: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    filter: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(JSONB, nullable=True))
    run_ids: list[int] | None = Field(
        default=None, sa_column=sa.Column(ARRAY(sa.BigInteger), nullable=True)
    )
    described: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    total: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    cursor_id: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger, nullable=True))
    done: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    skipped: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    may_run_commands: bool = Field(
        default=False, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false())
    )
    status: str = Field(
        default="running", sa_column=sa.Column(sa.Text, nullable=False, server_default="running")
    )
    owner: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    lease_until: datetime | None = _ts()
    resumed: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    created_at: datetime = _ts(nullable=False, now=True)
    finished_at: datetime | None = _ts()


class NotificationChannel(SQLModel, table=True):
    """Where messages go (`app.notify.channels`): an Apprise URL, kept encrypted with a key
    derived from SECRET_KEY; `hint` is the part a person may see again."""

    __tablename__ = "notification_channels"
    __table_args__ = (
        sa.CheckConstraint(
            "kind IN ('webhook', 'slack', 'email', 'apprise')", name="notification_channels_kind"
        ),
        sa.CheckConstraint(
            _between("per_minute", 1, limits.MAX_NOTIFY_PER_MINUTE),
            name="notification_channels_per_minute",
        ),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    name: str = Field(sa_column=sa.Column(sa.Text, nullable=False, unique=True))
    kind: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    secret: str = Field(sa_column=sa.Column(sa.Text, nullable=False))  # a Fernet token
    hint: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    per_minute: int = Field(
        default=10, sa_column=sa.Column(sa.Integer, nullable=False, server_default="10")
    )
    created_by: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    created_at: datetime = _ts(nullable=False, now=True)
    updated_at: datetime = _ts(nullable=False, now=True)


class NotificationRule(SQLModel, table=True):
    """Tell a channel about one kind of event, optionally only a job's or a schedule's
    (`app.notify.rules`)."""

    __tablename__ = "notification_rules"
    __table_args__ = (
        sa.CheckConstraint(
            "event IN ('dead_letter', 'breaker_open', 'lag', 'dead_man')",
            name="notification_rules_event",
        ),
        sa.Index("ix_notification_rules_channel", "channel_id"),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    channel_id: uuid.UUID = Field(
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("notification_channels.id", ondelete="CASCADE"), nullable=False
        )
    )
    event: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    job_id: uuid.UUID | None = Field(
        default=None,
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("job_definitions.id", ondelete="CASCADE"), nullable=True
        ),
    )
    schedule_id: uuid.UUID | None = Field(
        default=None,
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("schedules.id", ondelete="CASCADE"), nullable=True
        ),
    )
    created_by: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    created_at: datetime = _ts(nullable=False, now=True)


class NotificationOutbox(SQLModel, table=True):
    """One message owed to a channel (`app.notify.outbox`): written when the reaper sees an
    event, at most once per (channel, event) by the unique key; the delivery pass claims it,
    sends it and marks it sent (or retries it later, or gives up: failed)."""

    __tablename__ = "notification_outbox"
    __table_args__ = (
        sa.UniqueConstraint("channel_id", "event_key", name="uq_notification_outbox_event"),
        sa.CheckConstraint(
            "status IN ('pending', 'sent', 'failed')", name="notification_outbox_status"
        ),
        # The delivery pass: due messages only.
        sa.Index(
            "ix_notification_outbox_due",
            "next_try_at",
            postgresql_where=sa.text("status = 'pending'"),
        ),
        # A channel's delivery log, newest first.
        sa.Index("ix_notification_outbox_channel", "channel_id", "id"),
        # A channel's messages of the last minute, for its rate.
        sa.Index(
            "ix_notification_outbox_sent",
            "channel_id",
            "sent_at",
            postgresql_where=sa.text("status = 'sent' AND sent_with IS NULL"),
        ),
    )

    id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.BigInteger, sa.Identity(always=False), primary_key=True),
    )
    channel_id: uuid.UUID = Field(
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("notification_channels.id", ondelete="CASCADE"), nullable=False
        )
    )
    rule_id: uuid.UUID | None = Field(
        default=None,
        sa_column=sa.Column(
            sa.Uuid, sa.ForeignKey("notification_rules.id", ondelete="SET NULL"), nullable=True
        ),
    )
    event: str = Field(sa_column=sa.Column(sa.Text, nullable=False))  # dead_letter, test, …
    event_key: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    title: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    body: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    status: str = Field(
        default="pending", sa_column=sa.Column(sa.Text, nullable=False, server_default="pending")
    )
    tries: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    next_try_at: datetime = _ts(nullable=False, now=True)
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    created_at: datetime = _ts(nullable=False, now=True)
    sent_at: datetime | None = _ts()
    # Sent within the grouped message of this row (over the channel's rate), else null.
    sent_with: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger, nullable=True))
