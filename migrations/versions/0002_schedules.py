"""schedules: overlap, catch-up and DST policies, pause details, and the fire ledger

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 09:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKS = {
    "schedules_overlap": "overlap IN ('allow', 'cancel', 'queue', 'skip')",
    "schedules_dst_skipped": "dst_skipped IN ('shift', 'skip')",
    "schedules_dst_repeated": "dst_repeated IN ('both', 'first')",
    "schedules_catchup_limit_positive": "catchup_limit IS NULL OR (catchup AND catchup_limit > 0)",
    "schedules_catchup_window_positive": "catchup_window_seconds IS NULL OR catchup_window_seconds > 0",
    "schedules_auto_pause_positive": "auto_pause_after IS NULL OR auto_pause_after > 0",
}


def upgrade() -> None:
    op.create_table(
        "schedule_fires",
        sa.Column("schedule_id", sa.Uuid(), nullable=False),
        sa.Column("fire_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("local_time", sa.DateTime(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("coalesced_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("manual", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column(
            "recorded_at",
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
            "outcome IN ('coalesced', 'enqueued', 'missed', 'paused', 'queued', 'skipped_overlap')",
            name="schedule_fires_outcome",
        ),
        sa.CheckConstraint("coalesced_count >= 0", name="schedule_fires_coalesced_nonneg"),
        sa.ForeignKeyConstraint(["schedule_id"], ["schedules.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("schedule_id", "fire_time"),
    )
    op.create_index(
        "ix_schedule_fires_queued",
        "schedule_fires",
        ["schedule_id"],
        unique=False,
        postgresql_where=sa.text("outcome = 'queued'"),
    )

    op.add_column(
        "schedules", sa.Column("overlap", sa.Text(), server_default="skip", nullable=False)
    )
    op.execute("UPDATE schedules SET overlap = 'allow' WHERE allow_overlap")
    op.drop_column("schedules", "allow_overlap")
    op.add_column("schedules", sa.Column("catchup_limit", sa.Integer(), nullable=True))
    op.add_column("schedules", sa.Column("catchup_window_seconds", sa.Integer(), nullable=True))
    op.add_column(
        "schedules", sa.Column("dst_skipped", sa.Text(), server_default="shift", nullable=False)
    )
    op.add_column(
        "schedules", sa.Column("dst_repeated", sa.Text(), server_default="first", nullable=False)
    )
    op.add_column("schedules", sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("schedules", sa.Column("resumed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("schedules", sa.Column("auto_pause_after", sa.Integer(), nullable=True))
    op.add_column(
        "schedules",
        sa.Column("owns_job", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.alter_column(
        "schedules",
        "next_fire_time",
        existing_type=postgresql.TIMESTAMP(timezone=True),
        nullable=True,
    )
    for name, condition in CHECKS.items():
        op.create_check_constraint(name, "schedules", condition)
    # Paused schedules are now due too (their fires are recorded as paused).
    op.drop_index("ix_schedules_due", table_name="schedules", postgresql_where=sa.text("active"))
    op.create_index("ix_schedules_due", "schedules", ["next_fire_time", "id"], unique=False)
    op.create_index(
        "ix_schedules_name",
        "schedules",
        ["name"],
        unique=True,
        postgresql_where=sa.text("name <> ''"),
    )
    op.create_index(
        "ix_schedules_pause_expiry",
        "schedules",
        ["paused_until"],
        unique=False,
        postgresql_where=sa.text("paused_until IS NOT NULL"),
    )
    op.create_index(
        "ix_schedules_auto_pause",
        "schedules",
        ["id"],
        unique=False,
        postgresql_where=sa.text("auto_pause_after IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_schedules_auto_pause",
        table_name="schedules",
        postgresql_where=sa.text("auto_pause_after IS NOT NULL"),
    )
    op.drop_index(
        "ix_schedules_pause_expiry",
        table_name="schedules",
        postgresql_where=sa.text("paused_until IS NOT NULL"),
    )
    op.drop_index(
        "ix_schedules_name", table_name="schedules", postgresql_where=sa.text("name <> ''")
    )
    op.drop_index("ix_schedules_due", table_name="schedules")
    op.execute("DELETE FROM schedules WHERE next_fire_time IS NULL")
    op.create_index(
        "ix_schedules_due",
        "schedules",
        ["next_fire_time"],
        unique=False,
        postgresql_where=sa.text("active"),
    )
    for name in CHECKS:
        op.drop_constraint(name, "schedules", type_="check")
    op.alter_column(
        "schedules",
        "next_fire_time",
        existing_type=postgresql.TIMESTAMP(timezone=True),
        nullable=False,
    )
    op.add_column(
        "schedules",
        sa.Column("allow_overlap", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.execute("UPDATE schedules SET allow_overlap = (overlap = 'allow')")
    for column in (
        "owns_job",
        "auto_pause_after",
        "resumed_at",
        "paused_at",
        "dst_repeated",
        "dst_skipped",
        "catchup_window_seconds",
        "catchup_limit",
        "overlap",
    ):
        op.drop_column("schedules", column)
    op.drop_index(
        "ix_schedule_fires_queued",
        table_name="schedule_fires",
        postgresql_where=sa.text("outcome = 'queued'"),
    )
    op.drop_table("schedule_fires")
