"""fleet-wide rate limits per queue: at most `rate_limit` starts per `rate_period_seconds`,
refilled smoothly (a token every period / rate_limit seconds), with bursts up to
`rate_burst` starts (1 unless asked for), for the queue as a whole or, with `rate_per_key`,
for each key (the value of the runs' args field `key_field`). The queue's bucket:
`rate_tokens` left at `rate_tokens_at`; each key's, a row of `queue_key_rates`.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04 16:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_COUNT = 1_000_000
MAX_DURATION_SECONDS = 10 * 365 * 86400
CHECKS = {
    "queues_rate_limit_range": f"(rate_limit IS NULL OR rate_limit BETWEEN 1 AND {MAX_COUNT})",
    "queues_rate_period_range": (
        f"(rate_period_seconds IS NULL OR rate_period_seconds BETWEEN 1 AND {MAX_DURATION_SECONDS})"
    ),
    "queues_rate_burst_range": f"(rate_burst IS NULL OR rate_burst BETWEEN 1 AND {MAX_COUNT})",
    # a rate is a number of starts and its period, and its burst belongs to it
    "queues_rate_whole": "(rate_limit IS NULL) = (rate_period_seconds IS NULL) "
    "AND (rate_limit IS NULL) = (rate_burst IS NULL)",
    # a rate per key needs a rate, and the key field serves a per-key limit or rate
    "queues_rate_per_key_rated": "NOT rate_per_key OR rate_limit IS NOT NULL",
    "queues_key_field_used": "(key_field IS NULL) = (key_max_running IS NULL AND NOT rate_per_key)",
}


def upgrade() -> None:
    op.drop_constraint("queues_key_limit_whole", "queues", type_="check")
    op.create_check_constraint(
        "queues_key_limit_keyed", "queues", "key_max_running IS NULL OR key_field IS NOT NULL"
    )
    op.add_column(
        "queues",
        sa.Column("rate_per_key", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("queues", sa.Column("rate_limit", sa.Integer(), nullable=True))
    op.add_column("queues", sa.Column("rate_period_seconds", sa.Integer(), nullable=True))
    op.add_column("queues", sa.Column("rate_burst", sa.Integer(), nullable=True))
    op.add_column("queues", sa.Column("rate_tokens", sa.Float(), nullable=True))
    op.add_column("queues", sa.Column("rate_tokens_at", sa.DateTime(timezone=True), nullable=True))
    for name, check in CHECKS.items():
        op.create_check_constraint(name, "queues", check)
    # Each key's rate bucket, for a queue whose rate applies per key: the starts it had left
    # at `at` (a key without a row has a full bucket; the reaper drops refilled ones).
    op.create_table(
        "queue_key_rates",
        sa.Column("queue", sa.Text(), primary_key=True),
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    # Whether any limit is set: the plain claim and the finish's claim of released DAG
    # steps leave such a queue to the limited claim (a short test in statements that must
    # stay small).
    op.add_column(
        "queues",
        sa.Column(
            "limited",
            sa.Boolean(),
            sa.Computed(
                "max_running IS NOT NULL OR key_max_running IS NOT NULL OR rate_limit IS NOT NULL",
                persisted=True,
            ),
        ),
    )


def downgrade() -> None:
    op.drop_table("queue_key_rates")
    op.drop_column("queues", "limited")
    for name in CHECKS:
        op.drop_constraint(name, "queues", type_="check")
    for column in ("rate_tokens_at", "rate_tokens", "rate_burst", "rate_period_seconds",
                   "rate_limit", "rate_per_key"):  # fmt: skip
        op.drop_column("queues", column)
    op.drop_constraint("queues_key_limit_keyed", "queues", type_="check")
    op.create_check_constraint(
        "queues_key_limit_whole", "queues", "(key_field IS NULL) = (key_max_running IS NULL)"
    )
