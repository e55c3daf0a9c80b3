"""fleet-wide concurrency limits per queue: at most `max_running` of its runs running at
once, and at most `key_max_running` running per key, the key being the value of the run's
args field `key_field` (for example `customer_id`). Who set them and when, for the Queues
page.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04 15:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_COUNT = 1_000_000


def upgrade() -> None:
    op.add_column("queues", sa.Column("max_running", sa.Integer(), nullable=True))
    op.add_column("queues", sa.Column("key_field", sa.Text(), nullable=True))
    op.add_column("queues", sa.Column("key_max_running", sa.Integer(), nullable=True))
    op.add_column("queues", sa.Column("limits_by", sa.Text(), nullable=True))
    op.add_column("queues", sa.Column("limits_at", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint(
        "queues_max_running_range",
        "queues",
        f"(max_running IS NULL OR max_running BETWEEN 1 AND {MAX_COUNT})",
    )
    op.create_check_constraint(
        "queues_key_max_running_range",
        "queues",
        f"(key_max_running IS NULL OR key_max_running BETWEEN 1 AND {MAX_COUNT})",
    )
    op.create_check_constraint(
        "queues_key_field_length",
        "queues",
        "(char_length(key_field) IS NULL OR char_length(key_field) BETWEEN 1 AND 200)",
    )
    # A per-key limit needs the field its keys come from, and the field a limit.
    op.create_check_constraint(
        "queues_key_limit_whole",
        "queues",
        "(key_field IS NULL) = (key_max_running IS NULL)",
    )


def downgrade() -> None:
    for name in (
        "queues_key_limit_whole",
        "queues_key_field_length",
        "queues_key_max_running_range",
        "queues_max_running_range",
    ):
        op.drop_constraint(name, "queues", type_="check")
    for column in ("limits_at", "limits_by", "key_max_running", "key_field", "max_running"):
        op.drop_column("queues", column)
