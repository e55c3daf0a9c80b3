"""audit subjects: version history keyed by the stable id of a job, schedule or workflow,
not by its name (a renamed job showed none of its earlier versions, and a job renamed to
the name of a deleted one showed that one's)

Existing rows are carried over by replaying each kind's audit log in order: a create
starts a new subject, a rename (a before and after snapshot with different names) moves
the subject to the new name, a delete ends it. Subjects alive at the end take the id of
the row that has their name now; those of deleted things keep an id of their own.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 09:00:00.000000
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = {"job": "job_definitions", "schedule": "schedules", "workflow": "workflows"}
UPDATE_BATCH = 10_000


def upgrade() -> None:
    op.add_column("audit_log", sa.Column("subject_id", sa.Uuid(), nullable=True))
    op.create_index("ix_audit_log_subject", "audit_log", ["target_type", "subject_id", "id"])
    bind = op.get_bind()
    for target_type, table in TABLES.items():
        rows = bind.execute(
            sa.text(
                "SELECT id, action, target_id AS name,"
                " details -> 'before' ->> 'name' AS before_name,"
                " details -> 'after' ->> 'name' AS after_name"
                " FROM audit_log WHERE target_type = :type AND target_id IS NOT NULL ORDER BY id"
            ),
            {"type": target_type},
        ).all()
        subjects, alive = _replay(rows)
        current = {
            name: id_ for name, id_ in bind.execute(sa.text(f"SELECT name, id FROM {table}"))
        }
        real = {alive[name]: current[name] for name in alive if name in current}
        audit_ids = list(subjects)
        for start in range(0, len(audit_ids), UPDATE_BATCH):
            ids = audit_ids[start : start + UPDATE_BATCH]
            bind.execute(
                sa.text(
                    "UPDATE audit_log a SET subject_id = m.subject"
                    " FROM unnest(CAST(:ids AS bigint[]), CAST(:subjects AS uuid[]))"
                    " AS m(id, subject) WHERE a.id = m.id"
                ),
                {"ids": ids, "subjects": [real.get(subjects[i], subjects[i]) for i in ids]},
            )


def _replay(rows: Iterable[Any]) -> tuple[dict[int, uuid.UUID], dict[str, uuid.UUID]]:
    """Each audit row's subject, and the subjects alive at the end by their last name."""
    alive: dict[str, uuid.UUID] = {}
    subjects: dict[int, uuid.UUID] = {}
    for row in rows:
        if row.action.endswith(".create"):
            subject = alive[row.name] = uuid.uuid4()
        elif row.before_name and row.after_name and row.before_name != row.after_name:
            subject = alive.pop(row.before_name, None) or uuid.uuid4()
            alive[row.after_name] = subject
        else:
            subject = alive.setdefault(row.name, uuid.uuid4())
        if row.action.endswith(".delete"):
            alive.pop(row.name, None)
        subjects[row.id] = subject
    return subjects, alive


def downgrade() -> None:
    op.drop_index("ix_audit_log_subject", table_name="audit_log")
    op.drop_column("audit_log", "subject_id")
