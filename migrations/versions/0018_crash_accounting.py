"""crash accounting: a run remembers the last attempt whose handler began (so an expired
lease of an attempt that never began goes back to the queue without spending anything),
how often its worker died under it, and whether that made it quarantined; a job says after
how many crashes its runs are quarantined.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 03:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Constant defaults: PostgreSQL adds these columns without rewriting the table.
    op.add_column(
        "job_runs", sa.Column("began_attempt", sa.Integer(), nullable=False, server_default="0")
    )
    # Runs running now began under the old rules: their attempt counts as begun.
    op.execute("UPDATE job_runs SET began_attempt = attempt WHERE status = 'running'")
    op.add_column(
        "job_runs", sa.Column("crash_count", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column(
        "job_runs", sa.Column("lone_crashes", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column(
        "job_runs",
        sa.Column("quarantined", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "job_definitions",
        sa.Column("max_crashes", sa.Integer(), nullable=False, server_default="3"),
    )
    op.create_check_constraint(
        "job_definitions_crashes_range",
        "job_definitions",
        "max_crashes BETWEEN 1 AND 100",
    )


def downgrade() -> None:
    op.drop_constraint("job_definitions_crashes_range", "job_definitions", type_="check")
    op.drop_column("job_definitions", "max_crashes")
    op.drop_column("job_runs", "quarantined")
    op.drop_column("job_runs", "lone_crashes")
    op.drop_column("job_runs", "crash_count")
    op.drop_column("job_runs", "began_attempt")
