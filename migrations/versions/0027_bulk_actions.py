"""bulk actions: cancel, retry or re-run many runs at once. A row holds what was asked
(the runs list's filter or the ticked runs), who asked, and how far it got (the keyset
cursor and the counts, moved in each batch's transaction), so an action a dying web
process leaves behind is taken over where it stopped.

Revision ID: 0027
Revises: 0025
Create Date: 2026-12-04 21:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0027"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bulk_actions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("filter", postgresql.JSONB(), nullable=True),
        sa.Column("run_ids", postgresql.ARRAY(sa.BigInteger()), nullable=True),
        sa.Column("described", sa.Text(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("cursor_id", sa.BigInteger(), nullable=True),
        sa.Column("done", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("skipped", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("may_run_commands", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("status", sa.Text(), nullable=False, server_default="running"),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resumed", sa.Integer(), nullable=False, server_default="0"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("action IN ('cancel', 'retry', 'rerun')", name="bulk_actions_action"),
        sa.CheckConstraint("status IN ('running', 'finished')", name="bulk_actions_status"),
    )
    op.create_index("ix_bulk_actions_recent", "bulk_actions", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_bulk_actions_recent", table_name="bulk_actions")
    op.drop_table("bulk_actions")
