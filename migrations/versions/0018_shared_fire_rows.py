"""one reader of the trigger's fire rows, which may share a fire among many schedules: at the
top of the hour thousands of schedules share a rule, so the trigger sends one row for all
of those that fire alike (their ids, jobs and spread offsets as arrays) instead of one per
schedule. `sundial_fire_rows` turns the document back into one row per schedule fire for
the three writes of a batch (advance, runs, ledger).

PL/pgSQL, not inlined SQL, on purpose: the planner then takes the declared 100 rows (what
it assumed of `jsonb_to_recordset` before), and keeps looking each run's job definition up
by its key; an inlined body's larger guess chose to hash the whole job_definitions table
for every batch.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION sundial_fire_rows(doc jsonb) RETURNS TABLE (
            schedule_id uuid, job_id uuid, previous timestamptz, next_fire_time timestamptz,
            resume bool, fire_time timestamptz, local_time timestamp, outcome text,
            link timestamptz, run_at timestamptz, coalesced_count int, manual bool,
            detail text, run_id bigint
        )
        LANGUAGE plpgsql STABLE PARALLEL SAFE ROWS 100 AS $$
        #variable_conflict use_column
        BEGIN
            RETURN QUERY
            -- A row of one schedule.
            SELECT f.schedule_id, f.job_id, f.previous, f.next_fire_time, f.resume,
                   f.fire_time, f.local_time, f.outcome, f.link, f.run_at,
                   f.coalesced_count, f.manual, f.detail, f.run_id
            FROM jsonb_to_recordset(doc) AS f(
                schedule_id uuid, job_id uuid, previous timestamptz,
                next_fire_time timestamptz, resume bool, fire_time timestamptz,
                local_time timestamp, outcome text, link timestamptz, run_at timestamptz,
                coalesced_count int, manual bool, detail text, run_id bigint
            )
            WHERE f.schedule_id IS NOT NULL
            UNION ALL
            -- A fire shared by many schedules: each one moves from `previous` to
            -- `next_fire_time` and gets a run at `run_at` plus its own spread offset.
            SELECT m.schedule_id, m.job_id, g.previous, g.next_fire_time, NULL,
                   g.fire_time, g.local_time, g.outcome, g.fire_time,
                   g.run_at + m.offset_ms * interval '1 millisecond', NULL, NULL, g.detail,
                   NULL
            FROM jsonb_to_recordset(doc) AS g(
                schedule_ids uuid[], job_ids uuid[], offsets_ms bigint[],
                previous timestamptz, next_fire_time timestamptz, fire_time timestamptz,
                local_time timestamp, outcome text, run_at timestamptz, detail text
            )
            CROSS JOIN LATERAL unnest(g.schedule_ids, g.job_ids, g.offsets_ms)
                AS m(schedule_id, job_id, offset_ms)
            WHERE g.schedule_ids IS NOT NULL;
        END
        $$
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION sundial_fire_rows(jsonb)")
