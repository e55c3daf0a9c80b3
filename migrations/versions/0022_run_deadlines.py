"""deadlines: a run not started by its `deadline` ends skipped, with reason `expired`
(the reaper ends them; the claim never starts one). The reaper finds them through a
partial index of the pending runs that have one. A schedule's `expire_after_seconds`
gives its fires' runs a deadline that long after their time.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04 16:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_DURATION = 10 * 365 * 86400
SUPPORTED = (
    "(deadline IS NULL OR (deadline >= '1900-01-01 00:00:00+00'::timestamptz "
    "AND deadline < '2300-01-01 00:00:00+00'::timestamptz))"
)


def upgrade() -> None:
    op.add_column("schedules", sa.Column("expire_after_seconds", sa.Integer(), nullable=True))
    op.create_check_constraint(
        "schedules_expire_after_range",
        "schedules",
        f"(expire_after_seconds IS NULL OR expire_after_seconds BETWEEN 1 AND {MAX_DURATION})",
    )
    op.add_column("job_runs", sa.Column("deadline", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint("job_runs_deadline_supported", "job_runs", SUPPORTED)
    op.create_index(
        "ix_job_runs_expiring",
        "job_runs",
        ["deadline"],
        postgresql_where=sa.text("status = 'pending' AND deadline IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_job_runs_expiring", table_name="job_runs")
    op.drop_constraint("job_runs_deadline_supported", "job_runs", type_="check")
    op.drop_column("job_runs", "deadline")
    op.drop_constraint("schedules_expire_after_range", "schedules", type_="check")
    op.drop_column("schedules", "expire_after_seconds")
