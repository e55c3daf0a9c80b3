"""history by creation time: the runs page's date filter ("runs created in the last hour")
over a month of history.

The history is partitioned by each run's end, and nothing indexed its creation: a filter on
it walked every history row newest first looking for a match, 6.8 s over 30 days of a
million runs (`bench.history_scale`). With this index each day's partition answers at once,
and most with nothing.

Made on the partitioned parent, as 0034's: on an existing history each day's index is built
in turn under a lock that holds the mover back (not the claims).

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-07 06:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_run_history_created ON run_history (created_at)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_run_history_created")
