"""on-call: run logs, error fingerprints and their resolutions, lag SLO per schedule

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 06:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEAD_LETTERS = "status IN ('failed', 'timed_out')"


def upgrade() -> None:
    op.add_column("job_runs", sa.Column("error_fingerprint", sa.Text(), nullable=True))
    op.create_index(
        "ix_job_runs_dead_letter_groups",
        "job_runs",
        ["error_fingerprint", "finished_at"],
        unique=False,
        postgresql_where=sa.text(DEAD_LETTERS),
    )
    op.create_index(
        "ix_job_runs_finished_handler",
        "job_runs",
        ["finished_at", "handler"],
        unique=False,
        postgresql_where=sa.text("finished_at IS NOT NULL"),
    )
    op.create_table(
        "dead_letter_resolutions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("through", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.CheckConstraint(
            "action IN ('resolved', 'discarded')", name="dead_letter_resolutions_action"
        ),
        sa.CheckConstraint(
            "char_length(reason) BETWEEN 1 AND 2000", name="dead_letter_resolutions_reason"
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_dead_letter_resolutions_fingerprint",
        "dead_letter_resolutions",
        ["fingerprint", "through"],
        unique=False,
    )
    op.create_index(
        op.f("ix_dead_letter_resolutions_at"), "dead_letter_resolutions", ["at"], unique=False
    )
    op.create_table(
        "run_logs",
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stream", sa.Text(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.CheckConstraint("stream IN ('log', 'stdout', 'stderr')", name="run_logs_stream"),
        sa.PrimaryKeyConstraint("run_id", "attempt", "seq"),
    )
    op.add_column("schedules", sa.Column("lag_slo_seconds", sa.Integer(), nullable=True))
    op.create_check_constraint(
        "schedules_lag_slo_range",
        "schedules",
        "(lag_slo_seconds IS NULL OR lag_slo_seconds BETWEEN 1 AND 315360000)",
    )


def downgrade() -> None:
    op.drop_constraint("schedules_lag_slo_range", "schedules", type_="check")
    op.drop_column("schedules", "lag_slo_seconds")
    op.drop_table("run_logs")
    op.drop_table("dead_letter_resolutions")
    op.drop_index("ix_job_runs_finished_handler", table_name="job_runs")
    op.drop_index("ix_job_runs_dead_letter_groups", table_name="job_runs")
    op.drop_column("job_runs", "error_fingerprint")
