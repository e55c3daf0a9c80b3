"""dashboard indexes: runs by status, by schedule and with an error (runs page, overview
counts), lost and released attempts (overview alert, workers page)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 06:30:00.000000

The worker already reports loop lag, in-flight runs and pool saturation in
`workers.stats`, so no worker column is added.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_job_runs_status_id", "job_runs", ["status", "id"], unique=False)
    op.create_index(
        "ix_job_runs_errors",
        "job_runs",
        ["id"],
        unique=False,
        postgresql_where=sa.text("last_error IS NOT NULL"),
    )
    op.create_index(
        "ix_job_runs_schedule_id",
        "job_runs",
        ["schedule_id", "id"],
        unique=False,
        postgresql_where=sa.text("schedule_id IS NOT NULL"),
    )
    op.create_index(
        "ix_job_run_attempts_lost",
        "job_run_attempts",
        ["finished_at"],
        unique=False,
        postgresql_where=sa.text("outcome IN ('lost', 'released')"),
    )


def downgrade() -> None:
    op.drop_index("ix_job_run_attempts_lost", table_name="job_run_attempts")
    op.drop_index("ix_job_runs_schedule_id", table_name="job_runs")
    op.drop_index("ix_job_runs_errors", table_name="job_runs")
    op.drop_index("ix_job_runs_status_id", table_name="job_runs")
