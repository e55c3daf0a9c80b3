"""Migrations produce exactly the schema the models declare, and re-running is a no-op."""

import re
import uuid
from typing import Any

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from psycopg.types.json import Jsonb
from sqlmodel import SQLModel

import app.models  # noqa: F401  (registers the tables)
from app.core import migrate
from app.core.db import make_engine
from app.handlers.execution_models import ExecutionModel
from app.runs.history import HISTORY_TABLES, is_history_table
from app.runs.states import RunStatus

EXPECTED_TABLES = {
    "job_definitions",
    "schedules",
    "schedule_fires",
    "backfills",
    "job_runs",
    "job_run_deps",
    "job_run_attempts",
    "workers",
    "leader_leases",
    "users",
    "audit_log",
    "web_sessions",
    "sign_in_links",
    "login_failures",
    "workflows",
    "workflow_steps",
    "workflow_edges",
    "dag_runs",
    "fleet_settings",
    "exclusion_calendars",
    "blackout_windows",
    "api_tokens",
    "dead_letter_resolutions",
    "run_logs",
    "job_stat_hours",
    "job_stat_durations",
    "job_stat_window",
    "job_stat_state",
    "queues",
    "queue_key_rates",
    "queue_fair_turns",
    "dependencies",
    "dependency_calls",
    "bulk_actions",
    "notification_channels",
    "notification_rules",
    "notification_outbox",
    "alembic_version",
} | set(HISTORY_TABLES.values())


def test_upgrade_on_an_empty_database_creates_every_table(empty_db_url: str) -> None:
    assert migrate.current_revision(empty_db_url) is None
    migrate.upgrade(empty_db_url)
    assert migrate.current_revision(empty_db_url) == migrate.head_revision()
    with psycopg.connect(empty_db_url) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        }
    assert tables == EXPECTED_TABLES


def test_second_upgrade_changes_nothing(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url)
    schema_before = _schema_fingerprint(empty_db_url)
    migrate.upgrade(empty_db_url)
    assert _schema_fingerprint(empty_db_url) == schema_before


def test_migrated_schema_matches_models(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            # History tables mirror the hot ones column for column and are made by the
            # migrations and the reaper, not declared as models (see test_history).
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "include_name": _not_history}
            )
            diff = compare_metadata(context, SQLModel.metadata)
    finally:
        engine.dispose()
    assert diff == []


def _not_history(name: str | None, type_: str, parents: Any) -> bool:
    return type_ != "table" or not is_history_table(name or "")


def test_seed_partial_indexes_exist(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'job_runs'"
    ).fetchall()
    defs = {r["indexname"]: r["indexdef"] for r in rows}
    assert "WHERE (status = 'pending'::text)" in defs["ix_job_runs_dispatch"]
    assert "priority DESC, run_at" in defs["ix_job_runs_dispatch"]
    assert "WHERE (status = 'running'::text)" in defs["ix_job_runs_lease"]
    assert "UNIQUE" in defs["job_runs_schedule_fire_time"]
    assert "UNIQUE" in defs["job_runs_idempotency_key"]


def test_status_check_constraint_matches_the_enum(conn: psycopg.Connection[Any]) -> None:
    row = conn.execute(
        "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint "
        "WHERE conname = 'job_runs_status'"
    ).fetchone()
    assert row is not None
    assert set(re.findall(r"'([a-z_]+)'::text", row["def"])) == {s.value for s in RunStatus}


@pytest.mark.parametrize("status", ["PENDING", "done", "retry_wait"])
def test_database_refuses_unknown_status(conn: psycopg.Connection[Any], status: str) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO job_runs (handler, status) VALUES ('noop', %s)", (status,))


def test_database_refuses_unknown_execution_model(conn: psycopg.Connection[Any]) -> None:
    assert {m.value for m in ExecutionModel} == {"async", "thread", "process", "subprocess"}
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO job_runs (handler, status, execution_model) "
            "VALUES ('noop', 'pending', 'greenlet')"
        )


def test_one_shot_runs_do_not_collide_on_schedule_fire_time(conn: psycopg.Connection[Any]) -> None:
    for _ in range(2):
        conn.execute("INSERT INTO job_runs (handler, status) VALUES ('noop', 'pending')")
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 2}


def _schema_fingerprint(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return (
            conn.execute(
                "SELECT table_name, column_name, data_type, is_nullable, column_default "
                "FROM information_schema.columns WHERE table_schema = 'public' "
                "ORDER BY table_name, column_name"
            ).fetchall()
            + conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
                "ORDER BY indexname"
            ).fetchall()
        )


def test_0016_carries_version_history_over_to_stable_ids_through_renames(
    empty_db_url: str,
) -> None:
    """Audit rows written before 0016 (keyed by name) get the id of the thing they were
    about: followed through a rename, apart from a deleted thing of the same name."""
    migrate.upgrade(empty_db_url, "0015")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        renamed, new_a = uuid.uuid4(), uuid.uuid4()
        conn.execute(
            "INSERT INTO job_definitions (id, name, handler) VALUES (%s, 'B', 'noop'),"
            " (%s, 'A', 'noop')",
            (renamed, new_a),
        )
        log = [  # (action, target, before name, after name), oldest first
            ("job.create", "B", None, "B"),  # an older B, deleted below
            ("job.delete", "B", "B", None),
            ("job.create", "A", None, "A"),
            ("job.update", "A", "A", "A"),
            ("job.update", "B", "A", "B"),  # A renamed to B
            ("job.create", "A", None, "A"),  # a new A
            ("job.rollback", "B", "B", "B"),
        ]
        for action, target, before, after in log:
            conn.execute(
                "INSERT INTO audit_log (actor, action, target_type, target_id, details)"
                " VALUES ('alice', %s, 'job', %s, %s)",
                (action, target, Jsonb({"before": before and {"name": before},
                                        "after": after and {"name": after}})),
            )  # fmt: skip
    migrate.upgrade(empty_db_url)
    with psycopg.connect(empty_db_url) as conn:
        subjects = [r[0] for r in conn.execute("SELECT subject_id FROM audit_log ORDER BY id")]
    old_b = subjects[0]
    assert subjects == [old_b, old_b, renamed, renamed, renamed, new_a, renamed]
    assert old_b is not None and old_b not in (renamed, new_a)
