"""search runs by what they carried: a GIN index on the ended runs' `job_runs.args`
(jsonb_path_ops), so the runs list's `args @> '{"customer_id": 42}'` reads only the
matching runs.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04 21:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Ended runs only: a run takes one entry, when it finishes, instead of one at its submit,
# its claim and its finish (each a new row version with new entries in every index whose
# predicate it meets); the few runs still waiting or running are searched through their
# own partial indexes. No pending list (fastupdate off): it is one list per index, which
# every finishing worker would append to under one lock (docs/benchmarks.md).
ENDED = "status IN ('completed', 'failed', 'timed_out', 'cancelled', 'skipped')"


def upgrade() -> None:
    op.create_index(
        "ix_job_runs_args",
        "job_runs",
        ["args"],
        postgresql_using="gin",
        postgresql_ops={"args": "jsonb_path_ops"},
        postgresql_where=sa.text(ENDED),
        postgresql_with={"fastupdate": "off"},
    )


def downgrade() -> None:
    op.drop_index("ix_job_runs_args", table_name="job_runs")
