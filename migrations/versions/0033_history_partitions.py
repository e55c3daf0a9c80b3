"""history in day partitions: ended runs leave the hot tables for `run_history` and its
relatives (attempts, log lines, DAG edges, DAG runs), each range-partitioned by
`history_at` (the run's end; a DAG run's last step's end, so a DAG run stays in one day).
Retention drops whole days (`app.runs.history`); the `all_*` views read hot and history as
one.

Online: this only creates empty tables and views. The reaper moves the ended runs that are
already there in batches of a thousand, oldest day first, creating each day's partitions as
it goes; claims never wait on it (it takes only rows that ended long ago, with SKIP LOCKED).

Rollback (`sundial migrate --down-to 0032`): puts every history row back into its hot table,
then drops the views and the history tables. Stop the reaper first, or it moves runs back
out; the copy is one transaction, so size it (`sundial history`) before starting.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-05 00:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqlalchemy import text

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Hot table → its history table and the view that reads both. Kept in step with
# app.runs.history.HISTORY_TABLES.
HISTORY = {
    "job_runs": ("run_history", "all_runs"),
    "job_run_attempts": ("run_attempt_history", "all_run_attempts"),
    "run_logs": ("run_log_history", "all_run_logs"),
    "job_run_deps": ("run_dep_history", "all_run_deps"),
    "dag_runs": ("dag_run_history", "all_dag_runs"),
}

# What the pages and the API look history up by. No unique index: a partitioned table's
# would have to include history_at; an id is unique because it left the hot table once.
HISTORY_INDEXES = [
    "CREATE INDEX ix_run_history_id ON run_history (id)",
    "CREATE INDEX ix_run_history_job ON run_history (job_id, id) WHERE job_id IS NOT NULL",
    "CREATE INDEX ix_run_history_dag_run ON run_history (dag_run_id) WHERE dag_run_id IS NOT NULL",
    "CREATE INDEX ix_run_history_schedule_id ON run_history (schedule_id, id) "
    "WHERE schedule_id IS NOT NULL",
    "CREATE INDEX ix_run_history_rare_status ON run_history (status, id) "
    "WHERE status IN ('failed', 'timed_out', 'cancelled', 'skipped')",
    "CREATE INDEX ix_run_history_errors ON run_history (id) WHERE last_error IS NOT NULL",
    "CREATE INDEX ix_run_history_dead_letters ON run_history (error_fingerprint, finished_at) "
    "WHERE status IN ('failed', 'timed_out')",
    "CREATE INDEX ix_run_history_args ON run_history USING gin (args jsonb_path_ops) "
    "WITH (fastupdate = off)",
    "CREATE INDEX ix_run_attempt_history_run ON run_attempt_history (run_id, attempt)",
    "CREATE INDEX ix_run_log_history_run ON run_log_history (run_id, attempt, seq)",
    "CREATE INDEX ix_run_dep_history_run ON run_dep_history (run_id)",
    "CREATE INDEX ix_run_dep_history_depends_on ON run_dep_history (depends_on)",
    "CREATE INDEX ix_dag_run_history_id ON dag_run_history (id)",
    "CREATE INDEX ix_dag_run_history_created ON dag_run_history (created_at)",
    "CREATE INDEX ix_dag_run_history_workflow ON dag_run_history (workflow_id, created_at) "
    "WHERE workflow_id IS NOT NULL",
]


def columns(table: str) -> list[str]:
    rows = op.get_bind().execute(
        text(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = :t ORDER BY ordinal_position"
        ),
        {"t": table},
    )
    return [r[0] for r in rows]


def upgrade() -> None:
    for hot, (history, view) in HISTORY.items():
        # The hot table's columns in its order, then history_at: a moving statement's
        # `DELETE … RETURNING r.*, <history_at>` fits it as is.
        op.execute(
            f"CREATE TABLE {history} (LIKE {hot}, history_at timestamptz NOT NULL) "
            "PARTITION BY RANGE (history_at)"
        )
        listed = ", ".join(f'"{c}"' for c in columns(hot))
        op.execute(
            f"CREATE VIEW {view} AS SELECT {listed} FROM {hot} "
            f"UNION ALL SELECT {listed} FROM {history}"
        )
    for statement in HISTORY_INDEXES:
        op.execute(statement)


def downgrade() -> None:
    for hot, (history, view) in HISTORY.items():
        listed = ", ".join(f'"{c}"' for c in columns(hot))
        op.execute(f"DROP VIEW {view}")
        overriding = " OVERRIDING SYSTEM VALUE" if hot == "job_runs" else ""
        op.execute(
            f"INSERT INTO {hot} ({listed}){overriding} SELECT {listed} FROM {history} "
            "ON CONFLICT DO NOTHING"
        )
        op.execute(f"DROP TABLE {history}")
