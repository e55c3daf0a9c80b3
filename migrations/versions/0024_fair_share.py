"""fair share between a queue's keys: with `fair_share`, a queue's claims start its runs
key by key in turns (the value of the runs' args field `key_field`), so that one key's
backlog never holds another key's runs up; `key_weights` gives a key more starts per turn
(1 unless listed). A queue sharing fairly is claimed by the limited claim, from a list of
turns it keeps in `queue_fair_turns`.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04 18:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LIMITED_BEFORE = "max_running IS NOT NULL OR key_max_running IS NOT NULL OR rate_limit IS NOT NULL"
KEY_FIELD_USED_BEFORE = "(key_field IS NULL) = (key_max_running IS NULL AND NOT rate_per_key)"


def _limited(expression: str) -> None:
    """The generated `limited` column, again with `expression` (PostgreSQL cannot alter one)."""
    op.drop_column("queues", "limited")
    op.add_column(
        "queues", sa.Column("limited", sa.Boolean(), sa.Computed(expression, persisted=True))
    )


def upgrade() -> None:
    op.add_column(
        "queues", sa.Column("fair_share", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.add_column(
        "queues",
        sa.Column(
            "key_weights",
            postgresql.JSONB(),
            nullable=False,
            server_default=sa.text("'{}'::jsonb"),
        ),
    )
    op.create_check_constraint(
        "queues_key_weights_object", "queues", "jsonb_typeof(key_weights) = 'object'"
    )
    op.drop_constraint("queues_key_field_used", "queues", type_="check")
    op.create_check_constraint(
        "queues_key_field_used",
        "queues",
        "(key_field IS NULL) = (key_max_running IS NULL AND NOT rate_per_key AND NOT fair_share)",
    )
    _limited(f"{LIMITED_BEFORE} OR fair_share")
    # The turns a fairly shared queue's claims take runs from: its due runs in turn order,
    # read at `read_at` and kept for a second, each claim taking its runs off the front
    # (reading them afresh costs a sort of every due run of the queue).
    op.create_table(
        "queue_fair_turns",
        sa.Column("queue", sa.Text(), primary_key=True),
        sa.Column("ids", postgresql.ARRAY(sa.BigInteger()), nullable=False),
        sa.Column("keys", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("suspects", postgresql.ARRAY(sa.Boolean()), nullable=False),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("queue_fair_turns")
    # a queue that only shared fairly keeps its other settings, without a key field
    op.execute(
        "UPDATE queues SET key_field = NULL WHERE key_max_running IS NULL AND NOT rate_per_key"
    )
    _limited(LIMITED_BEFORE)
    op.drop_constraint("queues_key_field_used", "queues", type_="check")
    op.create_check_constraint("queues_key_field_used", "queues", KEY_FIELD_USED_BEFORE)
    op.drop_constraint("queues_key_weights_object", "queues", type_="check")
    op.drop_column("queues", "key_weights")
    op.drop_column("queues", "fair_share")
