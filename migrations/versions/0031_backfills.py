"""backfills: a schedule's fires over a past range, run on request with a concurrency cap
(`backfills`), and the fire ledger's mark of the fires a backfill ran
(`schedule_fires.backfill_id`).

Revision ID: 0031
Revises: 0027
Create Date: 2026-12-04 21:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_CONCURRENCY = 50
CHECKS = {
    "backfills_status": "status IN ('running', 'done', 'cancelled')",
    "backfills_range": "range_end >= range_start",
    "backfills_concurrency_range": f"concurrency BETWEEN 1 AND {MAX_CONCURRENCY}",
    "backfills_counts_nonneg": "fire_count >= 0 AND left_alone >= 0",
}


def upgrade() -> None:
    op.create_table(
        "backfills",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column(
            "schedule_id",
            sa.Uuid(),
            sa.ForeignKey("schedules.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("range_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("range_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("fire_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("left_alone", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("status", sa.Text(), nullable=False, server_default="running"),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    )
    for name, check in CHECKS.items():
        op.create_check_constraint(name, "backfills", check)
    op.create_index("ix_backfills_schedule", "backfills", ["schedule_id", "created_at"])
    op.create_index(
        "ix_backfills_running", "backfills", ["id"], postgresql_where=sa.text("status = 'running'")
    )
    op.add_column("schedule_fires", sa.Column("backfill_id", sa.Uuid(), nullable=True))
    op.create_index(
        "ix_schedule_fires_backfill",
        "schedule_fires",
        ["backfill_id"],
        postgresql_where=sa.text("backfill_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_schedule_fires_backfill", table_name="schedule_fires")
    op.drop_column("schedule_fires", "backfill_id")
    op.drop_index("ix_backfills_running", table_name="backfills")
    op.drop_index("ix_backfills_schedule", table_name="backfills")
    op.drop_table("backfills")
