"""web sign-in: sessions, one-time sign-in links, failed sign-ins, and the operator role

Revision ID: 0008
Revises: 0005
Create Date: 2026-12-01 03:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _user_key() -> list[sa.SchemaItem]:
    """Columns and constraints a session and a sign-in link share."""
    return [
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    ]


def upgrade() -> None:
    op.drop_constraint("users_role", "users", type_="check")
    op.create_check_constraint(
        "users_role", "users", "role IN ('admin', 'editor', 'operator', 'viewer')"
    )
    op.create_table(
        "web_sessions",
        *_user_key(),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
    )
    op.create_index(op.f("ix_web_sessions_user_id"), "web_sessions", ["user_id"], unique=False)
    op.create_index(
        op.f("ix_web_sessions_expires_at"), "web_sessions", ["expires_at"], unique=False
    )
    op.create_table("sign_in_links", *_user_key())
    op.create_index(op.f("ix_sign_in_links_user_id"), "sign_in_links", ["user_id"], unique=False)
    op.create_table(
        "login_failures",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("username", sa.Text(), nullable=False),
        sa.Column("address", sa.Text(), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_login_failures_key", "login_failures", ["username", "address", "at"])


def downgrade() -> None:
    op.drop_table("login_failures")
    op.drop_table("sign_in_links")
    op.drop_table("web_sessions")
    op.execute("UPDATE users SET role = 'viewer' WHERE role = 'operator'")
    op.drop_constraint("users_role", "users", type_="check")
    op.create_check_constraint("users_role", "users", "role IN ('admin', 'editor', 'viewer')")
