"""the reaper's lost attempts say whether it re-queued their run

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 09:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOST = "outcome = 'lost'"


def upgrade() -> None:
    # /metrics counts re-queues from this column over a small partial index, instead of
    # joining every lost attempt to its run (a scan of job_runs once there are thousands).
    op.add_column("job_run_attempts", sa.Column("requeued", sa.Boolean(), nullable=True))
    op.execute(
        "UPDATE job_run_attempts a SET requeued = NOT (r.attempt = a.attempt "
        "AND r.status IN ('failed', 'cancelled', 'timed_out')) "
        f"FROM job_runs r WHERE r.id = a.run_id AND a.{LOST}"
    )
    op.drop_index("ix_job_run_attempts_lost_runs", table_name="job_run_attempts")
    op.create_index(
        "ix_job_run_attempts_lost_requeued",
        "job_run_attempts",
        ["requeued"],
        postgresql_where=sa.text(LOST),
    )


def downgrade() -> None:
    op.drop_index("ix_job_run_attempts_lost_requeued", table_name="job_run_attempts")
    op.create_index(
        "ix_job_run_attempts_lost_runs",
        "job_run_attempts",
        ["run_id", "attempt"],
        postgresql_where=sa.text(LOST),
    )
    op.drop_column("job_run_attempts", "requeued")
