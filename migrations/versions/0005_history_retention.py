"""history retention: an index of ended runs by when they ended, for the reaper's pruning

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 13:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_job_runs_ended",
        "job_runs",
        ["finished_at"],
        postgresql_where=sa.text("status IN ('completed', 'cancelled', 'skipped')"),
    )


def downgrade() -> None:
    op.drop_index("ix_job_runs_ended", table_name="job_runs")
