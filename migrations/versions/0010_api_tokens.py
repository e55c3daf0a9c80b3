"""API tokens, and the partial indexes /metrics counts with

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 06:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("scope IN ('read', 'write')", name="api_tokens_scope"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index(op.f("ix_api_tokens_user_id"), "api_tokens", ["user_id"], unique=False)
    # /metrics: lease expiries (the reaper's `lost` attempts) and blocked runs, each counted
    # from a small partial index instead of a scan of the history.
    op.create_index(
        "ix_job_run_attempts_lost_runs",
        "job_run_attempts",
        ["run_id", "attempt"],
        postgresql_where=sa.text("outcome = 'lost'"),
    )
    op.create_index(
        "ix_job_runs_blocked", "job_runs", ["id"], postgresql_where=sa.text("status = 'blocked'")
    )
    # Recent fires by outcome: fire times grow with insertion, so a BRIN index costs the
    # trigger's inserts next to nothing; autosummarize keeps the newest ranges indexed.
    op.create_index(
        "ix_schedule_fires_fire_time_brin",
        "schedule_fires",
        ["fire_time"],
        postgresql_using="brin",
        postgresql_with={"autosummarize": "on"},
    )


def downgrade() -> None:
    op.drop_index("ix_schedule_fires_fire_time_brin", table_name="schedule_fires")
    op.drop_index("ix_job_runs_blocked", table_name="job_runs")
    op.drop_index("ix_job_run_attempts_lost_runs", table_name="job_run_attempts")
    op.drop_table("api_tokens")
