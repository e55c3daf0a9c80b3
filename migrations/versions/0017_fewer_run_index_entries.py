"""fewer index entries per run: the runs page's status filter and the overview's counts
keep an index only for the statuses no other index orders (failed, timed out, cancelled,
skipped), and the job statistics roll-up reads endings through the two indexes of ended
runs. A no-op run's life (submit, claim, finish) wrote ten index entries; now six.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RARE_STATUSES = "status IN ('failed', 'timed_out', 'cancelled', 'skipped')"


def upgrade() -> None:
    op.create_index(
        "ix_job_runs_rare_status",
        "job_runs",
        ["status", "id"],
        unique=False,
        postgresql_where=sa.text(RARE_STATUSES),
    )
    op.drop_index("ix_job_runs_status_id", table_name="job_runs")
    op.drop_index("ix_job_runs_finished_handler", table_name="job_runs")


def downgrade() -> None:
    op.create_index(
        "ix_job_runs_finished_handler",
        "job_runs",
        ["finished_at", "handler"],
        unique=False,
        postgresql_where=sa.text("finished_at IS NOT NULL"),
    )
    op.create_index("ix_job_runs_status_id", "job_runs", ["status", "id"], unique=False)
    op.drop_index("ix_job_runs_rare_status", table_name="job_runs")
