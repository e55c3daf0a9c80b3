"""circuit breakers and retry budgets per dependency: a job definition names the
dependencies it calls (`dependencies`); each named dependency has a row of `dependencies`
with its breaker's settings and state (closed, open, half_open), and the outcomes of its
calls (`dependency_calls`, kept over its longest window) tell the reaper when to change it.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04 19:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_NAME_LENGTH = 200
MAX_DEPENDENCIES = 20
MAX_COUNT = 1_000_000
DAY = 86400
CHECKS = {
    "dependencies_name_length": f"char_length(name) BETWEEN 1 AND {MAX_NAME_LENGTH}",
    "dependencies_state": "state IN ('closed', 'open', 'half_open')",
    "dependencies_failure_threshold_range": "failure_threshold > 0 AND failure_threshold <= 1",
    "dependencies_min_calls_range": f"min_calls BETWEEN 1 AND {MAX_COUNT}",
    "dependencies_window_range": f"window_seconds BETWEEN 1 AND {DAY}",
    "dependencies_cool_off_range": f"cool_off_seconds BETWEEN 1 AND {DAY}",
    "dependencies_probes_range": "probes BETWEEN 1 AND 1000",
    "dependencies_retry_budget_range": "retry_budget IS NULL OR retry_budget BETWEEN 0 AND 1",
    "dependencies_retry_window_range": f"retry_window_seconds BETWEEN 1 AND {DAY}",
    # an open breaker opened by itself reopens at a time; one opened by hand stays open
    "dependencies_open_until": "state <> 'open' OR manual OR reopen_at IS NOT NULL",
}


# Whether a dependency's breaker holds a run back (its claims ask, after a one-row check
# that some breaker holds anything back): a run of a job calling a dependency whose breaker
# is open, or half-open and the run is not one of its trial runs, or a retry while the
# dependency's retry budget is spent. Plain SQL, so the planner inlines it.
BREAKER_HOLDS = """
CREATE FUNCTION sundial_breaker_holds(job uuid, run bigint, attempt int, retry_base int)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT job IS NOT NULL AND EXISTS (
        SELECT FROM job_definitions j JOIN dependencies d ON d.name = ANY(j.dependencies)
        WHERE j.id = job
          AND (d.state = 'open'
               OR (d.state = 'half_open' AND NOT run = ANY(d.probe_runs))
               OR (d.retries_held AND attempt > retry_base))
    )
$$
"""


# Whether any breaker holds anything back: the finish's claim of released DAG steps asks
# (as a function, which keeps that statement within the driver's parse cache).
BREAKERS_HOLD = """
CREATE FUNCTION sundial_breakers_hold() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT FROM dependencies WHERE state <> 'closed' OR retries_held)
$$
"""


def upgrade() -> None:
    op.add_column(
        "job_definitions",
        sa.Column(
            "dependencies",
            postgresql.ARRAY(sa.Text()),
            nullable=False,
            server_default=sa.text("'{}'::text[]"),
        ),
    )
    op.create_check_constraint(
        "job_definitions_dependencies_count",
        "job_definitions",
        f"cardinality(dependencies) <= {MAX_DEPENDENCIES}",
    )
    op.create_table(
        "dependencies",
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("failure_threshold", sa.Float(), nullable=False, server_default="0.5"),
        sa.Column("min_calls", sa.Integer(), nullable=False, server_default="5"),
        sa.Column("window_seconds", sa.Integer(), nullable=False, server_default="60"),
        sa.Column("cool_off_seconds", sa.Integer(), nullable=False, server_default="30"),
        sa.Column("probes", sa.Integer(), nullable=False, server_default="3"),
        sa.Column("retry_budget", sa.Float(), nullable=True),
        sa.Column("retry_window_seconds", sa.Integer(), nullable=False, server_default="300"),
        sa.Column("state", sa.Text(), nullable=False, server_default="closed"),
        sa.Column(
            "state_since", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("reopen_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "probe_runs",
            postgresql.ARRAY(sa.BigInteger()),
            nullable=False,
            server_default=sa.text("'{}'::bigint[]"),
        ),
        sa.Column("manual", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("retries_held", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("changed_by", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("settings_by", sa.Text(), nullable=True),
        sa.Column("settings_at", sa.DateTime(timezone=True), nullable=True),
    )
    for name, check in CHECKS.items():
        op.create_check_constraint(name, "dependencies", check)
    op.create_table(
        "dependency_calls",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column("dependency", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("retry", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_dependency_calls_at", "dependency_calls", ["dependency", "at"])
    op.execute(BREAKER_HOLDS)
    op.execute(BREAKERS_HOLD)


def downgrade() -> None:
    op.execute("DROP FUNCTION sundial_breakers_hold()")
    op.execute("DROP FUNCTION sundial_breaker_holds(uuid, bigint, int, int)")
    op.drop_index("ix_dependency_calls_at", table_name="dependency_calls")
    op.drop_table("dependency_calls")
    op.drop_table("dependencies")
    op.drop_constraint("job_definitions_dependencies_count", "job_definitions", type_="check")
    op.drop_column("job_definitions", "dependencies")
