"""named queues: a run, a job definition and a submit name the queue a run waits in
(`default` unless given); a queue can be paused, fleet-wide, with who paused it and why. The
dispatch index leads with the queue, so each worker's claim reads its queue's due runs in
order.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 13:10:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME_LENGTH = "char_length(queue) BETWEEN 1 AND 200"


def upgrade() -> None:
    # Constant defaults: PostgreSQL adds these columns without rewriting the table.
    for table in ("job_runs", "job_definitions"):
        op.add_column(
            table, sa.Column("queue", sa.Text(), nullable=False, server_default="default")
        )
        op.create_check_constraint(f"{table}_queue_length", table, NAME_LENGTH)
    op.drop_index("ix_job_runs_dispatch", table_name="job_runs")
    op.create_index(
        "ix_job_runs_dispatch",
        "job_runs",
        ["queue", sa.text("priority DESC"), "run_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_table(
        "queues",
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("paused_by", sa.Text(), nullable=True),
        sa.Column("paused_note", sa.Text(), nullable=True),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.CheckConstraint("char_length(name) BETWEEN 1 AND 200", name="queues_name_length"),
    )


def downgrade() -> None:
    op.drop_table("queues")
    op.drop_index("ix_job_runs_dispatch", table_name="job_runs")
    op.create_index(
        "ix_job_runs_dispatch",
        "job_runs",
        [sa.text("priority DESC"), "run_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    for table in ("job_definitions", "job_runs"):
        op.drop_constraint(f"{table}_queue_length", table, type_="check")
        op.drop_column(table, "queue")
