"""lean trigger writes: the ledger's cascade by a statement trigger, partial target indexes

The trigger writes thousands of ledger rows and moves thousands of schedules per batch.
A foreign key from `schedule_fires` to `schedules` checked every ledger row (about 40% of
that insert); the ledger now goes with its schedule through a statement-level trigger
instead, which costs nothing on insert. Moving a schedule's next fire writes a new entry
in every index of `schedules`; the job and workflow indexes now hold only the rows that
have one, so each move writes one index entry fewer.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 12:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TARGET_INDEXES = {"ix_schedules_job_id": "job_id", "ix_schedules_workflow_id": "workflow_id"}


def upgrade() -> None:
    op.drop_constraint("schedule_fires_schedule_id_fkey", "schedule_fires", type_="foreignkey")
    op.execute(
        """
        CREATE FUNCTION sundial_delete_schedule_fires() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM schedule_fires f USING deleted d WHERE f.schedule_id = d.id;
            RETURN NULL;
        END
        $$
        """
    )
    # Also runs for schedules deleted by a cascade from their job definition or workflow.
    op.execute(
        """
        CREATE TRIGGER schedules_delete_fires
        AFTER DELETE ON schedules
        REFERENCING OLD TABLE AS deleted
        FOR EACH STATEMENT EXECUTE FUNCTION sundial_delete_schedule_fires()
        """
    )
    for name, column in TARGET_INDEXES.items():
        op.drop_index(name, table_name="schedules")
        op.create_index(
            name, "schedules", [column], postgresql_where=sa.text(f"{column} IS NOT NULL")
        )


def downgrade() -> None:
    for name, column in TARGET_INDEXES.items():
        op.drop_index(name, table_name="schedules")
        op.create_index(name, "schedules", [column])
    op.execute("DROP TRIGGER schedules_delete_fires ON schedules")
    op.execute("DROP FUNCTION sundial_delete_schedule_fires()")
    op.execute(
        "DELETE FROM schedule_fires f WHERE NOT EXISTS (SELECT FROM schedules s WHERE s.id = f.schedule_id)"
    )
    op.create_foreign_key(
        "schedule_fires_schedule_id_fkey",
        "schedule_fires",
        "schedules",
        ["schedule_id"],
        ["id"],
        ondelete="CASCADE",
    )
