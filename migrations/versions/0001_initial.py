"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 09:13:14.246290
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target_type", sa.Text(), nullable=False),
        sa.Column("target_id", sa.Text(), nullable=True),
        sa.Column(
            "details",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"], unique=False)
    op.create_table(
        "job_definitions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("handler", sa.Text(), nullable=False),
        sa.Column(
            "args",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("execution_model", sa.Text(), server_default="async", nullable=False),
        sa.Column("priority", sa.SmallInteger(), server_default="1", nullable=False),
        sa.Column("timeout_seconds", sa.Integer(), server_default="300", nullable=False),
        sa.Column("max_retries", sa.Integer(), server_default="3", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "execution_model IN ('async', 'process', 'subprocess', 'thread')",
            name="job_definitions_model",
        ),
        sa.CheckConstraint("max_retries >= 0", name="job_definitions_retries_nonneg"),
        sa.CheckConstraint("timeout_seconds > 0", name="job_definitions_timeout_positive"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "leader_leases",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("term", sa.BigInteger(), nullable=False),
        sa.Column(
            "acquired_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("username", sa.Text(), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), server_default="viewer", nullable=False),
        sa.Column("api_token_hash", sa.Text(), nullable=True),
        sa.Column("disabled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("role IN ('admin', 'editor', 'viewer')", name="users_role"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("api_token_hash"),
        sa.UniqueConstraint("username"),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "last_seen", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "handlers",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "stats",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_workers_last_seen"), "workers", ["last_seen"], unique=False)
    op.create_table(
        "schedules",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), server_default="", nullable=False),
        sa.Column("cron", sa.Text(), nullable=True),
        sa.Column("interval_seconds", sa.Integer(), nullable=True),
        sa.Column("timezone", sa.Text(), server_default="UTC", nullable=False),
        sa.Column("start_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_fire_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("allow_overlap", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("catchup", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("active", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("exact_minute", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("spread_seconds", sa.Integer(), server_default="60", nullable=False),
        sa.Column("paused_note", sa.Text(), nullable=True),
        sa.Column("paused_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "(cron IS NULL) <> (interval_seconds IS NULL)", name="schedules_cron_xor_interval"
        ),
        sa.CheckConstraint(
            "interval_seconds IS NULL OR interval_seconds > 0", name="schedules_interval_positive"
        ),
        sa.CheckConstraint("spread_seconds >= 0", name="schedules_spread_nonneg"),
        sa.ForeignKeyConstraint(["job_id"], ["job_definitions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_schedules_due",
        "schedules",
        ["next_fire_time"],
        unique=False,
        postgresql_where=sa.text("active"),
    )
    op.create_index(op.f("ix_schedules_job_id"), "schedules", ["job_id"], unique=False)
    op.create_table(
        "job_runs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("schedule_id", sa.Uuid(), nullable=True),
        sa.Column("fire_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("dag_run_id", sa.Uuid(), nullable=True),
        sa.Column("dag_node", sa.Text(), nullable=True),
        sa.Column("upstream_remaining", sa.Integer(), server_default="0", nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("handler", sa.Text(), nullable=False),
        sa.Column(
            "args",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("execution_model", sa.Text(), server_default="async", nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("priority", sa.SmallInteger(), server_default="1", nullable=False),
        sa.Column("base_priority", sa.SmallInteger(), server_default="1", nullable=False),
        sa.Column(
            "run_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.Column("retry_base", sa.Integer(), server_default="0", nullable=False),
        sa.Column("max_retries", sa.Integer(), server_default="3", nullable=False),
        sa.Column("timeout_seconds", sa.Integer(), server_default="300", nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "cancel_requested", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("traceback", sa.Text(), nullable=True),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("skip_reason", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "execution_model IN ('async', 'process', 'subprocess', 'thread')", name="job_runs_model"
        ),
        sa.CheckConstraint(
            "status IN ('blocked', 'cancelled', 'completed', 'failed', 'pending', 'running', 'skipped', 'timed_out')",
            name="job_runs_status",
        ),
        sa.CheckConstraint("attempt >= 0", name="job_runs_attempt_nonneg"),
        sa.CheckConstraint("max_retries >= 0", name="job_runs_retries_nonneg"),
        sa.CheckConstraint("timeout_seconds > 0", name="job_runs_timeout_positive"),
        sa.CheckConstraint("upstream_remaining >= 0", name="job_runs_upstream_nonneg"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "job_runs_schedule_fire_time",
        "job_runs",
        ["schedule_id", "fire_time"],
        unique=True,
        postgresql_where=sa.text("schedule_id IS NOT NULL AND dag_run_id IS NULL"),
    )
    op.create_index(
        "job_runs_idempotency_key",
        "job_runs",
        ["idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )
    op.create_index(
        "ix_job_runs_dispatch",
        "job_runs",
        [sa.literal_column("priority DESC"), "run_at"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_job_runs_job",
        "job_runs",
        ["job_id", "id"],
        unique=False,
        postgresql_where=sa.text("job_id IS NOT NULL"),
    )
    op.create_index(
        "ix_job_runs_lease",
        "job_runs",
        ["lease_until"],
        unique=False,
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_index(
        "ix_job_runs_schedule_active",
        "job_runs",
        ["schedule_id"],
        unique=False,
        postgresql_where=sa.text(
            "schedule_id IS NOT NULL AND status IN ('pending', 'blocked', 'running')"
        ),
    )
    op.create_index(
        "ix_job_runs_dag_run",
        "job_runs",
        ["dag_run_id"],
        unique=False,
        postgresql_where=sa.text("dag_run_id IS NOT NULL"),
    )
    op.create_index(
        "ix_job_runs_dead_letters",
        "job_runs",
        ["finished_at"],
        unique=False,
        postgresql_where=sa.text("status IN ('failed', 'timed_out')"),
    )
    # A queue table churns: every run is inserted, updated twice and finished within
    # seconds. Analyse and vacuum it after 2% of changes instead of PostgreSQL's 10-20%,
    # so claim plans see the real pending depth and dead tuples do not pile up.
    op.execute(
        "ALTER TABLE job_runs SET (autovacuum_vacuum_scale_factor = 0.02, "
        "autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0)"
    )
    op.create_table(
        "job_run_attempts",
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.Text(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "finished_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("traceback", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "attempt"),
    )
    op.create_table(
        "job_run_deps",
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("depends_on", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["depends_on"], ["job_runs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["job_runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "depends_on"),
    )
    op.create_index("ix_job_run_deps_depends_on", "job_run_deps", ["depends_on"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_job_run_deps_depends_on", table_name="job_run_deps")
    op.drop_table("job_run_deps")
    op.drop_table("job_run_attempts")
    op.drop_table("job_runs")
    op.drop_index(op.f("ix_schedules_job_id"), table_name="schedules")
    op.drop_index("ix_schedules_due", table_name="schedules", postgresql_where=sa.text("active"))
    op.drop_table("schedules")
    op.drop_index(op.f("ix_workers_last_seen"), table_name="workers")
    op.drop_table("workers")
    op.drop_table("users")
    op.drop_table("leader_leases")
    op.drop_table("job_definitions")
    op.drop_index(op.f("ix_audit_log_at"), table_name="audit_log")
    op.drop_table("audit_log")
