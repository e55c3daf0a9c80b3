"""history read indexes: what the pages, the API and the trigger read history by beyond
0033's indexes, now that they read ended runs through the `all_*` views.

- a schedule's runs by fire time: its page's last run, and the trigger's failing streaks
  (which must see a completed run that broke a streak after it moved, or a schedule would
  pause on failures a success had already ended);
- a workflow schedule's DAG runs by fire time, for the same streaks;
- a job's runs by their end, for its page's slowest runs (the hot table reads its two
  indexes of ended runs; history has no partition bound to prune by, its days being the
  runs' ends only for runs outside a DAG run).

Each is made on the partitioned parent, so every day's partition has it and the days the
mover makes later get it too. On an existing history that builds each day's index in turn
under a lock that holds the mover back (not the claims): size it with `sundial history`.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-05 01:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

READ_INDEXES = {
    "ix_run_history_schedule_fire": "run_history (schedule_id, fire_time, id) "
    "WHERE schedule_id IS NOT NULL",
    "ix_dag_run_history_schedule_fire": "dag_run_history (schedule_id, fire_time) "
    "WHERE schedule_id IS NOT NULL",
    "ix_run_history_job_finished": "run_history (job_id, finished_at) WHERE job_id IS NOT NULL",
}


def upgrade() -> None:
    for name, definition in READ_INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON {definition}")


def downgrade() -> None:
    for name in READ_INDEXES:
        op.execute(f"DROP INDEX {name}")
