"""workflows (reusable DAGs over job definitions), DAG runs, schedules that fire workflows

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 10:09:09.248274
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dag_runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), server_default="", nullable=False),
        sa.Column("workflow_id", sa.Uuid(), nullable=True),
        sa.Column("schedule_id", sa.Uuid(), nullable=True),
        sa.Column("fire_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "dag_runs_schedule_fire_time",
        "dag_runs",
        ["schedule_id", "fire_time"],
        unique=True,
        postgresql_where=sa.text("schedule_id IS NOT NULL"),
    )
    op.create_index("ix_dag_runs_created", "dag_runs", ["created_at"], unique=False)
    op.create_index(
        "ix_dag_runs_workflow",
        "dag_runs",
        ["workflow_id", "created_at"],
        unique=False,
        postgresql_where=sa.text("workflow_id IS NOT NULL"),
    )
    op.create_table(
        "workflows",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
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
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "workflow_steps",
        sa.Column("workflow_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column(
            "args",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["job_id"], ["job_definitions.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["workflow_id"], ["workflows.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("workflow_id", "name"),
    )
    op.create_index(op.f("ix_workflow_steps_job_id"), "workflow_steps", ["job_id"], unique=False)
    op.create_table(
        "workflow_edges",
        sa.Column("workflow_id", sa.Uuid(), nullable=False),
        sa.Column("upstream", sa.Text(), nullable=False),
        sa.Column("downstream", sa.Text(), nullable=False),
        sa.CheckConstraint("upstream <> downstream", name="workflow_edges_not_self"),
        sa.ForeignKeyConstraint(
            ["workflow_id", "downstream"],
            ["workflow_steps.workflow_id", "workflow_steps.name"],
            onupdate="CASCADE",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workflow_id", "upstream"],
            ["workflow_steps.workflow_id", "workflow_steps.name"],
            onupdate="CASCADE",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("workflow_id", "upstream", "downstream"),
    )
    op.add_column("schedule_fires", sa.Column("dag_run_id", sa.Uuid(), nullable=True))
    op.add_column("schedules", sa.Column("workflow_id", sa.Uuid(), nullable=True))
    op.alter_column("schedules", "job_id", existing_type=sa.UUID(), nullable=True)
    op.create_index(op.f("ix_schedules_workflow_id"), "schedules", ["workflow_id"], unique=False)
    op.create_foreign_key(
        "schedules_workflow_id_fkey",
        "schedules",
        "workflows",
        ["workflow_id"],
        ["id"],
        ondelete="CASCADE",
    )
    op.create_check_constraint(
        "schedules_job_xor_workflow", "schedules", "(job_id IS NULL) <> (workflow_id IS NULL)"
    )


def downgrade() -> None:
    op.drop_constraint("schedules_job_xor_workflow", "schedules", type_="check")
    op.drop_constraint("schedules_workflow_id_fkey", "schedules", type_="foreignkey")
    op.drop_index(op.f("ix_schedules_workflow_id"), table_name="schedules")
    op.alter_column("schedules", "job_id", existing_type=sa.UUID(), nullable=False)
    op.drop_column("schedules", "workflow_id")
    op.drop_column("schedule_fires", "dag_run_id")
    op.drop_table("workflow_edges")
    op.drop_index(op.f("ix_workflow_steps_job_id"), table_name="workflow_steps")
    op.drop_table("workflow_steps")
    op.drop_table("workflows")
    op.drop_index(
        "ix_dag_runs_workflow",
        table_name="dag_runs",
        postgresql_where=sa.text("workflow_id IS NOT NULL"),
    )
    op.drop_index("ix_dag_runs_created", table_name="dag_runs")
    op.drop_index(
        "dag_runs_schedule_fire_time",
        table_name="dag_runs",
        postgresql_where=sa.text("schedule_id IS NOT NULL"),
    )
    op.drop_table("dag_runs")
