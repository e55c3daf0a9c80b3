"""exclusion calendars: holidays and blackout windows a schedule may name; `excluded` fires

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 06:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OUTCOMES = ("coalesced", "enqueued", "missed", "paused", "queued", "skipped_overlap")
LOW, HIGH = "'1900-01-01 00:00:00+00'::timestamptz", "'2300-01-01 00:00:00+00'::timestamptz"
TIMES_SUPPORTED = " AND ".join(
    f"({c} IS NULL OR ({c} >= {LOW} AND {c} < {HIGH}))" for c in ("starts_at", "ends_at")
)


def _outcome_check(outcomes: Sequence[str]) -> str:
    return "outcome IN ({})".format(", ".join(f"'{o}'" for o in sorted(outcomes)))


def upgrade() -> None:
    op.create_table(
        "exclusion_calendars",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("country", sa.Text(), nullable=True),
        sa.Column("subdivision", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "char_length(name) BETWEEN 1 AND 200", name="exclusion_calendars_name_length"
        ),
        sa.CheckConstraint(
            "subdivision IS NULL OR country IS NOT NULL",
            name="exclusion_calendars_subdivision_needs_country",
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "blackout_windows",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("calendar_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("timezone", sa.Text(), server_default="UTC", nullable=False),
        sa.CheckConstraint("ends_at > starts_at", name="blackout_windows_end_after_start"),
        sa.CheckConstraint(TIMES_SUPPORTED, name="blackout_windows_times_supported"),
        sa.ForeignKeyConstraint(["calendar_id"], ["exclusion_calendars.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_blackout_windows_calendar_id"), "blackout_windows", ["calendar_id"], unique=False
    )
    op.add_column("schedules", sa.Column("calendar_id", sa.Uuid(), nullable=True))
    op.create_foreign_key(
        "schedules_calendar_id_fkey",
        "schedules",
        "exclusion_calendars",
        ["calendar_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_index(
        "ix_schedules_calendar_id",
        "schedules",
        ["calendar_id"],
        postgresql_where=sa.text("calendar_id IS NOT NULL"),
    )
    op.drop_constraint("schedule_fires_outcome", "schedule_fires", type_="check")
    op.create_check_constraint(
        "schedule_fires_outcome", "schedule_fires", _outcome_check((*OUTCOMES, "excluded"))
    )


def downgrade() -> None:
    op.execute("DELETE FROM schedule_fires WHERE outcome = 'excluded'")
    op.drop_constraint("schedule_fires_outcome", "schedule_fires", type_="check")
    op.create_check_constraint("schedule_fires_outcome", "schedule_fires", _outcome_check(OUTCOMES))
    op.drop_index("ix_schedules_calendar_id", table_name="schedules")
    op.drop_constraint("schedules_calendar_id_fkey", "schedules", type_="foreignkey")
    op.drop_column("schedules", "calendar_id")
    op.drop_index(op.f("ix_blackout_windows_calendar_id"), table_name="blackout_windows")
    op.drop_table("blackout_windows")
    op.drop_table("exclusion_calendars")
