"""snooze and progress: from inside a job, a handler may put its run back for later without
spending an attempt (`ctx.snooze`: the run keeps the reason, when it is due again and how
often it snoozed) and report how far it got (`ctx.progress`: a number, a short message and
when the worker wrote them). Attempts' history rows say `snoozed` for a snooze.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-08 10:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_REASON = 500
MAX_MESSAGE = 200


def _supported(column: str) -> str:
    return (
        f"({column} IS NULL OR ({column} >= '1900-01-01 00:00:00+00'::timestamptz "
        f"AND {column} < '2300-01-01 00:00:00+00'::timestamptz))"
    )


def upgrade() -> None:
    op.add_column("job_runs", sa.Column("progress", sa.Float(), nullable=True))
    op.add_column("job_runs", sa.Column("progress_message", sa.Text(), nullable=True))
    op.add_column("job_runs", sa.Column("progress_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "job_runs", sa.Column("snooze_count", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column("job_runs", sa.Column("snooze_reason", sa.Text(), nullable=True))
    op.add_column("job_runs", sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True))
    # NaN sorts above Infinity in PostgreSQL, so `< 'Infinity'` refuses both.
    op.create_check_constraint(
        "job_runs_progress_finite",
        "job_runs",
        "progress IS NULL OR (progress > '-Infinity'::float8 AND progress < 'Infinity'::float8)",
    )
    op.create_check_constraint(
        "job_runs_snooze_text_length",
        "job_runs",
        f"(progress_message IS NULL OR char_length(progress_message) <= {MAX_MESSAGE})"
        f" AND (snooze_reason IS NULL OR char_length(snooze_reason) <= {MAX_REASON})",
    )
    op.create_check_constraint("job_runs_snooze_count_nonneg", "job_runs", "snooze_count >= 0")
    op.create_check_constraint(
        "job_runs_snooze_times_supported",
        "job_runs",
        _supported("progress_at") + " AND " + _supported("snoozed_until"),
    )


def downgrade() -> None:
    for name in (
        "job_runs_snooze_times_supported",
        "job_runs_snooze_count_nonneg",
        "job_runs_snooze_text_length",
        "job_runs_progress_finite",
    ):
        op.drop_constraint(name, "job_runs", type_="check")
    for column in (
        "snoozed_until",
        "snooze_reason",
        "snooze_count",
        "progress_at",
        "progress_message",
        "progress",
    ):
        op.drop_column("job_runs", column)
