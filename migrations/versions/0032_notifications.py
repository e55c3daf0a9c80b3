"""notifications: channels (an encrypted Apprise URL), rules (an event kind, optionally one
job's or one schedule's) and the outbox of messages owed, one per (channel, event).

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-04 22:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_PER_MINUTE = 600


def upgrade() -> None:
    op.create_table(
        "notification_channels",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False, unique=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("hint", sa.Text(), nullable=False),
        sa.Column("per_minute", sa.Integer(), nullable=False, server_default="10"),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_check_constraint(
        "notification_channels_kind",
        "notification_channels",
        "kind IN ('webhook', 'slack', 'email', 'apprise')",
    )
    op.create_check_constraint(
        "notification_channels_per_minute",
        "notification_channels",
        f"per_minute BETWEEN 1 AND {MAX_PER_MINUTE}",
    )
    op.create_table(
        "notification_rules",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column(
            "channel_id",
            sa.Uuid(),
            sa.ForeignKey("notification_channels.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column(
            "job_id",
            sa.Uuid(),
            sa.ForeignKey("job_definitions.id", ondelete="CASCADE"),
            nullable=True,
        ),
        sa.Column(
            "schedule_id",
            sa.Uuid(),
            sa.ForeignKey("schedules.id", ondelete="CASCADE"),
            nullable=True,
        ),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_check_constraint(
        "notification_rules_event",
        "notification_rules",
        "event IN ('dead_letter', 'breaker_open', 'lag', 'dead_man')",
    )
    op.create_index("ix_notification_rules_channel", "notification_rules", ["channel_id"])
    op.create_table(
        "notification_outbox",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column(
            "channel_id",
            sa.Uuid(),
            sa.ForeignKey("notification_channels.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "rule_id",
            sa.Uuid(),
            sa.ForeignKey("notification_rules.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("event_key", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False, server_default="pending"),
        sa.Column("tries", sa.Integer(), nullable=False, server_default="0"),
        sa.Column(
            "next_try_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sent_with", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("channel_id", "event_key", name="uq_notification_outbox_event"),
    )
    op.create_check_constraint(
        "notification_outbox_status",
        "notification_outbox",
        "status IN ('pending', 'sent', 'failed')",
    )
    op.create_index(
        "ix_notification_outbox_due",
        "notification_outbox",
        ["next_try_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_notification_outbox_channel", "notification_outbox", ["channel_id", "id"])
    op.create_index(
        "ix_notification_outbox_sent",
        "notification_outbox",
        ["channel_id", "sent_at"],
        postgresql_where=sa.text("status = 'sent' AND sent_with IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("notification_outbox")
    op.drop_table("notification_rules")
    op.drop_table("notification_channels")
