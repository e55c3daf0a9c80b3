"""triage pages: the per-job statistics roll-up (hourly figures and duration histograms
per job, the window's sums, how far they are filled) and an index of watched schedules

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 09:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = ("job_key", "handler")


def _key() -> list[sa.Column[object]]:
    return [
        sa.Column("job_key", sa.Uuid(), nullable=False),
        sa.Column("handler", sa.Text(), nullable=False),
    ]


def _counts() -> list[sa.Column[object]]:
    return [
        sa.Column(name, sa.Integer(), nullable=False)
        for name in ("runs", "completed", "failures", "retries")
    ]


def upgrade() -> None:
    op.create_table(
        "job_stat_hours",
        *_key(),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        *_counts(),
        sa.Column("shortest", sa.Float(), nullable=True),
        sa.Column("longest", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint(*KEY, "hour"),
    )
    op.create_index("ix_job_stat_hours_hour", "job_stat_hours", ["hour"])
    op.create_table(
        "job_stat_durations",
        *_key(),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("bucket", sa.SmallInteger(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(*KEY, "hour", "bucket"),
    )
    op.create_index("ix_job_stat_durations_hour", "job_stat_durations", ["hour"])
    op.create_table(
        "job_stat_window",
        *_key(),
        sa.Column("name", sa.Text(), nullable=False),
        *_counts(),
        sa.Column("failure_rate", sa.Float(), nullable=False),
        sa.Column("p50", sa.Float(), nullable=True),
        sa.Column("p95", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint(*KEY),
    )
    then = (sa.text("failure_rate DESC"), sa.text("failures DESC"), "name")
    op.create_index("ix_job_stat_window_failing", "job_stat_window", [*then])
    op.create_index(
        "ix_job_stat_window_slowest", "job_stat_window", [sa.text("p95 DESC NULLS LAST"), *then]
    )
    op.create_index("ix_job_stat_window_busiest", "job_stat_window", [sa.text("runs DESC"), *then])
    op.create_table(
        "job_stat_state",
        sa.Column("id", sa.SmallInteger(), nullable=False),
        sa.Column("through", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("id = 1", name="job_stat_state_one_row"),
        sa.PrimaryKeyConstraint("id"),
    )

    op.create_index(
        "ix_schedules_lag_slo",
        "schedules",
        ["name"],
        postgresql_where=sa.text("lag_slo_seconds IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_schedules_lag_slo", table_name="schedules")
    op.drop_table("job_stat_state")
    for order in ("failing", "slowest", "busiest"):
        op.drop_index(f"ix_job_stat_window_{order}", table_name="job_stat_window")
    op.drop_table("job_stat_window")
    op.drop_index("ix_job_stat_durations_hour", table_name="job_stat_durations")
    op.drop_table("job_stat_durations")
    op.drop_index("ix_job_stat_hours_hour", table_name="job_stat_hours")
    op.drop_table("job_stat_hours")
