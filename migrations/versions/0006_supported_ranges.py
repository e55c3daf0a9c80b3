"""supported ranges: CHECK constraints that keep every row loadable and computable

Existing rows that would break a constraint are fixed up first, in the migration's
transaction, then the constraints are added (and checked against every row). The fix-ups:

- instants outside 1900..2300 are clamped to the nearest bound; a pending run whose start
  lay outside is failed with that reason (a dead letter a person can see and retry);
- priorities of -32768 become -32767; timeouts, retries, intervals, spreads, catch-up and
  auto-pause values past their maximum become the maximum;
- a running run without a lease gets an expired one, so the reaper hands it back (or fails
  it) on its next tick; a blocked run with no upstream left to wait for is released.

- a name longer than 200 characters is cut to its first 160 followed by the row's id in
  parentheses, which keeps it unique and recognisable.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 03:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOW = "'1900-01-01 00:00:00+00'::timestamptz"
HIGH = "'2300-01-01 00:00:00+00'::timestamptz"
LAST = "'2299-12-31 23:59:59+00'::timestamptz"
MAX_DURATION = 315360000
MAX_COUNT = 1000000
MAX_RETRIES = 1000


def _times(*columns: str) -> str:
    return " AND ".join(f"({c} IS NULL OR ({c} >= {LOW} AND {c} < {HIGH}))" for c in columns)


def _between(expression: str, low: int, high: int, *, nullable: bool = False) -> str:
    check = f"{expression} BETWEEN {low} AND {high}"
    return f"({expression} IS NULL OR {check})" if nullable else check


RUN_TIMES = ("run_at", "fire_time", "lease_until", "started_at", "finished_at", "created_at")
SCHEDULE_TIMES = ("start_at", "end_at", "next_fire_time", "paused_until")

# (table, name, condition): checked against every row, after the fix-ups.
CONSTRAINTS = [
    ("job_definitions", "job_definitions_priority_range", _between("priority", -32767, 32767)),
    (
        "job_definitions",
        "job_definitions_timeout_range",
        _between("timeout_seconds", 1, MAX_DURATION),
    ),
    ("job_definitions", "job_definitions_retries_range", _between("max_retries", 0, MAX_RETRIES)),
    (
        "job_runs",
        "job_runs_priority_range",
        _between("priority", -32767, 32767) + " AND " + _between("base_priority", -32767, 32767),
    ),
    ("job_runs", "job_runs_timeout_range", _between("timeout_seconds", 1, MAX_DURATION)),
    ("job_runs", "job_runs_retries_range", _between("max_retries", 0, MAX_RETRIES)),
    ("job_runs", "job_runs_times_supported", _times(*RUN_TIMES)),
    (
        "job_runs",
        "job_runs_running_leased",
        "status <> 'running' OR (lease_owner IS NOT NULL AND lease_until IS NOT NULL)",
    ),
    ("job_runs", "job_runs_blocked_waits", "status <> 'blocked' OR upstream_remaining > 0"),
    (
        "schedules",
        "schedules_interval_range",
        _between("interval_seconds", 1, MAX_DURATION, nullable=True),
    ),
    ("schedules", "schedules_spread_range", _between("spread_seconds", 0, MAX_DURATION)),
    (
        "schedules",
        "schedules_catchup_limit_range",
        _between("catchup_limit", 1, MAX_COUNT, nullable=True),
    ),
    (
        "schedules",
        "schedules_catchup_window_range",
        _between("catchup_window_seconds", 1, MAX_DURATION, nullable=True),
    ),
    (
        "schedules",
        "schedules_auto_pause_range",
        _between("auto_pause_after", 1, MAX_COUNT, nullable=True),
    ),
    ("schedules", "schedules_times_supported", _times(*SCHEDULE_TIMES)),
    ("schedule_fires", "schedule_fires_times_supported", _times("fire_time")),
    ("dag_runs", "dag_runs_times_supported", _times("fire_time")),
]
NAMED_TABLES = ("job_definitions", "schedules", "workflows")
CONSTRAINTS += [
    ("job_definitions", "job_definitions_name_length", _between("char_length(name)", 1, 200)),
    ("schedules", "schedules_name_length", _between("char_length(name)", 0, 200)),
    ("workflows", "workflows_name_length", _between("char_length(name)", 1, 200)),
]


def _clamp(column: str) -> str:
    return f"{column} = greatest(least({column}, {LAST}), {LOW})"


def _clamp_where(columns: Sequence[str]) -> str:
    return " OR ".join(f"{c} < {LOW} OR {c} >= {HIGH}" for c in columns)


FIXUPS = [
    # A pending run due outside the supported range can never run as asked: a dead letter.
    f"""UPDATE job_runs SET status = 'failed', finished_at = now(),
        last_error = 'its start time ' || run_at::text
                     || ' lies outside the supported range (migration 0006)'
        WHERE status = 'pending' AND (run_at < {LOW} OR run_at >= {HIGH})""",
    f"UPDATE job_runs SET {', '.join(_clamp(c) for c in RUN_TIMES)} "
    f"WHERE {_clamp_where(RUN_TIMES)}",
    f"UPDATE schedules SET {', '.join(_clamp(c) for c in SCHEDULE_TIMES)} "
    f"WHERE {_clamp_where(SCHEDULE_TIMES)}",
    f"UPDATE schedule_fires SET {_clamp('fire_time')} WHERE {_clamp_where(['fire_time'])}",
    f"UPDATE dag_runs SET {_clamp('fire_time')} WHERE {_clamp_where(['fire_time'])}",
    "UPDATE job_runs SET priority = greatest(priority, -32767), "
    "base_priority = greatest(base_priority, -32767) "
    "WHERE priority < -32767 OR base_priority < -32767",
    "UPDATE job_definitions SET priority = -32767 WHERE priority < -32767",
    f"UPDATE job_runs SET timeout_seconds = least(timeout_seconds, {MAX_DURATION}), "
    f"max_retries = least(max_retries, {MAX_RETRIES}) "
    f"WHERE timeout_seconds > {MAX_DURATION} OR max_retries > {MAX_RETRIES}",
    f"UPDATE job_definitions SET timeout_seconds = least(timeout_seconds, {MAX_DURATION}), "
    f"max_retries = least(max_retries, {MAX_RETRIES}) "
    f"WHERE timeout_seconds > {MAX_DURATION} OR max_retries > {MAX_RETRIES}",
    f"""UPDATE schedules SET
        interval_seconds = least(interval_seconds, {MAX_DURATION}),
        spread_seconds = least(spread_seconds, {MAX_DURATION}),
        catchup_limit = least(catchup_limit, {MAX_COUNT}),
        catchup_window_seconds = least(catchup_window_seconds, {MAX_DURATION}),
        auto_pause_after = least(auto_pause_after, {MAX_COUNT})
        WHERE interval_seconds > {MAX_DURATION} OR spread_seconds > {MAX_DURATION}
           OR catchup_limit > {MAX_COUNT} OR catchup_window_seconds > {MAX_DURATION}
           OR auto_pause_after > {MAX_COUNT}""",
    # The reaper hands these back (or fails them) on its next tick, with its usual log line.
    """UPDATE job_runs SET lease_until = coalesce(lease_until, now()),
        lease_owner = coalesce(lease_owner, 'unknown (migration 0006)')
        WHERE status = 'running' AND (lease_until IS NULL OR lease_owner IS NULL)""",
    # Nothing left to wait for: released, as the last upstream's completion would have.
    "UPDATE job_runs SET status = 'pending' WHERE status = 'blocked' AND upstream_remaining <= 0",
    *(
        f"UPDATE {table} SET name = left(name, 160) || ' (' || id::text || ')' "
        "WHERE char_length(name) > 200"
        for table in NAMED_TABLES
    ),
]


def upgrade() -> None:
    for statement in FIXUPS:
        op.execute(statement)
    for table, name, condition in CONSTRAINTS:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({condition})")


def downgrade() -> None:
    for table, name, _ in reversed(CONSTRAINTS):
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
