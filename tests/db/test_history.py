"""History in day partitions (app.runs.history): ended runs leave the hot tables whole, the
views still show them, and retention drops whole days, never deleting a row of history."""

from __future__ import annotations

import dataclasses
import gzip
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.core.config import Settings
from app.dags import dag_submission
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import history, submission, transitions
from app.runs.run_inserts import NewRun
from app.services.reaper import Reaper
from tests.helpers.processes import finish_run
from tests.helpers.waits import db_now, wait_until_blocked

Conn = psycopg.Connection[Any]
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
FAIL = Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)


def settings(**overrides: Any) -> Settings:
    return dataclasses.replace(Settings.from_env({}), **overrides)


def ids_in(conn: Conn, table: str, column: str = "id") -> set[Any]:
    return {r[column] for r in conn.execute(f"SELECT {column} FROM {table}").fetchall()}


def refuse_history_deletes(conn: Conn) -> None:
    """Any DELETE (or UPDATE) of a history row, on any partition, now fails loudly."""
    conn.execute(
        "CREATE FUNCTION refuse_history_change() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'history row % of %', TG_OP, TG_TABLE_NAME; END $$"
    )
    for table in history.HISTORY_TABLES.values():
        conn.execute(
            f"CREATE TRIGGER refuse_change BEFORE DELETE OR UPDATE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION refuse_history_change()"
        )


def test_ended_runs_move_whole_after_the_hot_window_and_the_views_still_show_them(
    conn: Conn,
) -> None:
    done, failed, cancelled, waiting = (
        submission.submit(conn, NewRun("noop")).id for _ in range(4)
    )
    finish_run(conn, done, Outcome.completed({"rows": 3}))
    finish_run(conn, failed, FAIL)
    transitions.cancel(conn, cancelled)
    conn.execute("INSERT INTO run_logs VALUES (%s, 1, 1, now(), 'stdout', 'hello')", (done,))
    now = db_now(conn)
    keeper = Reaper(settings())

    assert keeper.move_to_history(conn, now + 30 * 60 * timedelta(seconds=1)).runs == 0
    moved = keeper.move_to_history(conn, now + 2 * HOUR)
    assert moved.runs == 2  # the dead letter stays hot, retryable in place, for a week
    assert ids_in(conn, "job_runs") == {failed, waiting}
    assert ids_in(conn, "run_history") == {done, cancelled}
    assert ids_in(conn, "run_attempt_history", "run_id") == {done}
    assert ids_in(conn, "run_log_history", "run_id") == {done}
    assert ids_in(conn, "job_run_attempts", "run_id") == {failed}
    # Every reader of history reads both, as one.
    assert ids_in(conn, "all_runs") == {done, failed, cancelled, waiting}
    row = conn.execute("SELECT status, result FROM all_runs WHERE id = %s", (done,)).fetchone()
    assert row == {"status": "completed", "result": {"rows": 3}}

    assert keeper.move_to_history(conn, now + 8 * DAY).runs == 1
    assert ids_in(conn, "job_runs") == {waiting}  # never ended: never moves
    assert ids_in(conn, "job_run_attempts", "run_id") == set()
    # Each run landed in the partition of the day it ended.
    day = history.partition_name("run_history", now.astimezone(UTC).date())
    assert ids_in(conn, day) == {done, cancelled, failed}


def test_a_run_with_an_idempotency_key_stays_hot_for_the_key_window(conn: Conn) -> None:
    keyed = submission.submit(conn, NewRun("noop", idempotency_key="order-7")).id
    finish_run(conn, keyed, Outcome.completed())
    keeper = Reaper(settings(idempotency_hours=24.0))
    now = db_now(conn)
    assert keeper.move_to_history(conn, now + 2 * HOUR).runs == 0
    assert submission.submit(conn, NewRun("noop", idempotency_key="order-7")).id == keyed
    assert keeper.move_to_history(conn, now + 25 * HOUR).runs == 1


def test_a_dag_run_moves_whole_into_its_last_steps_day(conn: Conn) -> None:
    nodes = {name: NewRun("noop") for name in "ABC"}
    dag = dag_submission.submit_dag(conn, nodes, [("A", "B"), ("B", "C")])
    finish_run(conn, dag.run_ids["A"], Outcome.completed())
    keeper = Reaper(settings())
    # A ended long ago in this future, but B and C still wait on it.
    assert keeper.move_to_history(conn, db_now(conn) + 365 * DAY).runs == 0
    finish_run(conn, dag.run_ids["B"], Outcome.completed())
    conn.execute(  # A ended the day before its last step
        "UPDATE job_runs SET finished_at = finished_at - interval '1 day' WHERE id = %s",
        (dag.run_ids["A"],),
    )
    finish_run(conn, dag.run_ids["C"], Outcome.completed())
    moved = keeper.move_to_history(conn, db_now(conn) + 2 * HOUR)
    assert (moved.dag_runs, moved.runs) == (1, 3)
    assert ids_in(conn, "job_runs") == set() and ids_in(conn, "dag_runs") == set()
    assert ids_in(conn, "dag_run_history") == {dag.id}
    assert len(ids_in(conn, "run_dep_history", "run_id")) == 2
    last = conn.execute("SELECT max(finished_at) AS at FROM run_history").fetchone()
    days = conn.execute("SELECT DISTINCT history_at FROM run_history").fetchall()
    assert last is not None and days == [{"history_at": last["at"]}]
    # The DAG page's reads see the moved DAG run and its edges.
    assert ids_in(conn, "all_dag_runs") == {dag.id}
    assert len(ids_in(conn, "all_run_deps", "run_id")) == 2


def test_a_dag_run_moved_while_a_step_is_retried_keeps_the_retried_step_hot(
    db_url: str, conn: Conn
) -> None:
    """A dead letter of an old DAG run is retried while the reaper moves that DAG run: the
    retry holds the step's row, so the move passes the DAG run over, whole."""
    dag = dag_submission.submit_dag(
        conn, {"A": NewRun("noop", max_retries=0), "B": NewRun("noop")}, [("A", "B")]
    )
    finish_run(conn, dag.run_ids["A"], FAIL)  # B is skipped
    other = psycopg.connect(db_url, autocommit=True, row_factory=dict_row)
    mover = threading.Thread(
        target=Reaper(settings()).move_to_history, args=(other, db_now(conn) + 365 * DAY)
    )
    with other:
        with conn.transaction():
            assert transitions.retry(conn, dag.run_ids["A"]) is not None
            mover.start()
            wait_until_blocked(conn, other.info.backend_pid, or_done=mover)
        mover.join(timeout=10)
    row = conn.execute("SELECT status FROM job_runs WHERE id = %s", (dag.run_ids["A"],)).fetchone()
    assert row == {"status": "pending"}
    assert ids_in(conn, "job_runs") == set(dag.run_ids.values())
    assert ids_in(conn, "run_history") == set()


def test_retention_drops_whole_days_and_never_deletes_a_history_row(conn: Conn) -> None:
    refuse_history_deletes(conn)
    runs = [submission.submit(conn, NewRun("noop")).id for _ in range(3)]
    for run in runs:
        finish_run(conn, run, Outcome.completed())
    now = db_now(conn)
    keeper = Reaper(settings(retention_days=30.0))
    assert keeper.move_to_history(conn, now + 2 * HOUR).runs == 3
    today = now.astimezone(UTC).date()

    assert keeper.prune(conn, now + 29 * DAY).days == 0
    assert ids_in(conn, "all_runs") == set(runs)
    assert keeper.prune(conn, now + 32 * DAY).days == 1
    assert ids_in(conn, "all_runs") == set()
    names = {p.name for p in history.partitions(conn)}
    assert not any(name.endswith(f"_p{today:%Y%m%d}") for name in names)
    # The days ahead of the clock it was given are made, ready for the mover.
    ahead = (now + 32 * DAY).astimezone(UTC).date() + DAY
    assert history.partition_name("run_history", ahead) in names


def test_a_day_an_active_dag_step_reads_from_is_kept_past_its_retention(conn: Conn) -> None:
    dag = dag_submission.submit_dag(conn, {"A": NewRun("noop")}, [])
    finish_run(conn, dag.run_ids["A"], Outcome.completed({"rows": 3}))
    now = db_now(conn)
    keeper = Reaper(settings(retention_days=30.0))
    assert keeper.move_to_history(conn, now + 2 * HOUR).dag_runs == 1
    # A step of that DAG run still waiting in the hot table (a run an older version let
    # join it, say): it reads A's result, so A's day must stay.
    late = submission.submit(conn, NewRun("noop")).id
    conn.execute("UPDATE job_runs SET dag_run_id = %s WHERE id = %s", (dag.id, late))
    dropped = history.drop_expired(conn, keep_since=(now + 40 * DAY).date())
    assert (dropped.days, dropped.kept_for_active) == ([], [now.astimezone(UTC).date()])
    assert ids_in(conn, "run_history") == {dag.run_ids["A"]}
    transitions.cancel(conn, late)
    dropped = history.drop_expired(conn, keep_since=(now + 40 * DAY).date())
    assert dropped.days == [now.astimezone(UTC).date()]


def test_a_day_is_archived_to_gzip_csv_before_it_is_dropped(conn: Conn, tmp_path: Path) -> None:
    runs = [submission.submit(conn, NewRun("noop", args={"n": i})).id for i in range(5)]
    for run in runs:
        finish_run(conn, run, Outcome.completed())
    now = db_now(conn)
    keeper = Reaper(settings(retention_days=1.0, archive_dir=tmp_path))
    keeper.move_to_history(conn, now + 2 * HOUR)
    assert keeper.prune(conn, now + 3 * DAY).days == 1
    day = now.astimezone(UTC).date()
    lines = gzip.open(tmp_path / "run_history" / f"{day:%Y-%m-%d}.csv.gz", "rt").read().splitlines()
    assert lines[0].startswith("id,") and lines[0].endswith(",history_at")
    assert sorted(int(line.split(",")[0]) for line in lines[1:]) == sorted(runs)
    attempts = gzip.open(tmp_path / "run_attempt_history" / f"{day:%Y-%m-%d}.csv.gz", "rt")
    assert len(attempts.read().splitlines()) == 1 + len(runs)
    assert not list(tmp_path.rglob("*.partial"))
    assert ids_in(conn, "all_runs") == set()


def test_dropping_a_day_waits_for_no_claim(db_url: str, conn: Conn) -> None:
    finish_run(conn, submission.submit(conn, NewRun("noop")).id, Outcome.completed())
    pending = submission.submit(conn, NewRun("noop")).id
    now = db_now(conn)
    Reaper(settings()).move_to_history(conn, now + 2 * HOUR)
    with psycopg.connect(db_url, row_factory=dict_row) as claimer:
        # A claim in an open transaction holds its locks on the hot table …
        (job,) = transitions.claim(claimer, "w", 1, 30)
        assert job.run_id == pending
        # … and a day of history still drops at once, with no wait allowed.
        conn.execute("SET lock_timeout = '500ms'")
        dropped = history.drop_expired(conn, keep_since=(now + 40 * DAY).date())
        assert dropped.days == [now.astimezone(UTC).date()]
        claimer.rollback()


def test_history_days_are_listed_with_their_rows_and_size(conn: Conn) -> None:
    for _ in range(2):
        finish_run(conn, submission.submit(conn, NewRun("noop")).id, Outcome.completed())
    now = db_now(conn)
    Reaper(settings()).move_to_history(conn, now + 2 * HOUR)
    (today,) = [d for d in history.days(conn) if d.day == now.astimezone(UTC).date()]
    assert today.runs == 2 and today.rows["run_attempt_history"] == 2
    assert today.bytes > 0


def test_a_partition_name_says_its_table_and_day() -> None:
    day = datetime(2026, 3, 29, tzinfo=UTC).date()
    assert history.partition_name("run_history", day) == "run_history_p20260329"
    assert history.is_history_table("run_history_p20260329")
    assert history.is_history_table("dag_run_history")
    assert not history.is_history_table("job_runs")


@pytest.mark.parametrize("hot", sorted(history.HISTORY_TABLES))
def test_a_history_table_has_its_hot_tables_columns_then_history_at(conn: Conn, hot: str) -> None:
    def columns(table: str) -> list[str]:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        return [r["column_name"] for r in rows]

    assert columns(history.HISTORY_TABLES[hot]) == [*columns(hot), "history_at"]


def test_the_cli_lists_the_days_kept_and_archives_one(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    from tests.helpers.commands import run_sundial

    for _ in range(3):
        finish_run(conn, submission.submit(conn, NewRun("noop")).id, Outcome.completed())
    now = db_now(conn)
    Reaper(settings()).move_to_history(conn, now + 2 * HOUR)
    day = now.astimezone(UTC).date()

    listed = run_sundial(db_url, "history")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == "day\truns\tattempts\tlog lines\tsize"
    assert any(line.startswith(f"{day}\t3\t3\t0\t") for line in lines)
    assert "days before" in lines[-1] and "SUNDIAL_RETENTION_DAYS=30" in lines[-1]

    archived = run_sundial(db_url, "history", "archive", str(day), "--to", str(tmp_path))
    assert archived.returncode == 0, archived.stderr
    assert str(tmp_path / "run_history" / f"{day:%Y-%m-%d}.csv.gz") in archived.stdout
    assert ids_in(conn, "run_history") != set()  # archiving alone keeps the day

    nowhere = run_sundial(db_url, "history", "archive", str(day))
    assert nowhere.returncode == 2
    assert "--to FOLDER or SUNDIAL_ARCHIVE_DIR" in nowhere.stderr
    missing = run_sundial(db_url, "history", "archive", "1999-01-01", "--to", str(tmp_path))
    assert missing.returncode == 2 and "no history is kept for 1999-01-01" in missing.stderr
    bad = run_sundial(db_url, "history", "archive", "yesterday", "--to", str(tmp_path))
    assert bad.returncode == 2 and "a day is written YYYY-MM-DD" in bad.stderr


def test_rolling_back_puts_history_back_into_the_hot_tables(db_url: str, conn: Conn) -> None:
    from tests.helpers.commands import run_sundial

    dag = dag_submission.submit_dag(conn, {"A": NewRun("noop"), "B": NewRun("noop")}, [("A", "B")])
    lone = submission.submit(conn, NewRun("noop")).id
    for run in (dag.run_ids["A"], dag.run_ids["B"], lone):
        finish_run(conn, run, Outcome.completed())
    Reaper(settings()).move_to_history(conn, db_now(conn) + 2 * HOUR)
    assert ids_in(conn, "job_runs") == set()
    conn.close()

    refused = run_sundial(db_url, "migrate", "--down-to", "9999")
    assert refused.returncode == 2 and "is not a revision before" in refused.stderr
    back = run_sundial(db_url, "migrate", "--down-to", "0032")
    assert back.returncode == 0, back.stderr
    with psycopg.connect(db_url, row_factory=dict_row) as again:
        assert ids_in(again, "job_runs") == {lone, *dag.run_ids.values()}
        assert len(ids_in(again, "job_run_attempts", "run_id")) == 3
        assert ids_in(again, "dag_runs") == {dag.id}
        assert len(ids_in(again, "job_run_deps", "run_id")) == 1
    assert run_sundial(db_url, "migrate").returncode == 0


def test_no_run_moves_before_the_statistics_roll_up_has_counted_it(conn: Conn) -> None:
    from app.observability import job_stats

    run = submission.submit(conn, NewRun("noop")).id
    finish_run(conn, run, Outcome.completed())
    now = db_now(conn)
    job_stats.fill(conn, now=now)  # filled up to a minute that closed before the run ended
    keeper = Reaper(settings())
    assert keeper.move_to_history(conn, now + 2 * HOUR).runs == 0
    job_stats.fill(conn, now=now + 2 * HOUR)
    assert keeper.move_to_history(conn, now + 2 * HOUR).runs == 1


def _vacuumed(conn: Conn, table: str) -> bool:
    row = conn.execute(
        "SELECT s.last_vacuum IS NOT NULL AS by_hand, c.relallvisible = c.relpages AS visible "
        "FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = %s::regclass",
        (table,),
    ).fetchone()
    return bool(row and row["by_hand"] and row["visible"])


def test_a_finished_days_partitions_are_vacuumed_once_and_the_days_still_written_are_not(
    conn: Conn,
) -> None:
    runs = [submission.submit(conn, NewRun("noop")).id for _ in range(3)]
    for run in runs:
        finish_run(conn, run, Outcome.completed())
    now = db_now(conn)
    keeper = Reaper(settings())
    assert keeper.move_to_history(conn, now + 2 * HOUR).runs == 3
    day = history.partitions(conn)[0].day
    written = history.partition_name("run_history", day)
    later = history.partition_name("run_history", day + DAY)
    history.ensure_days(conn, [day + DAY])

    with conn.transaction():  # VACUUM cannot run in a transaction: nothing is tried
        assert history.settle_days(conn, written_before=day + DAY, limit=10) == []
    settled = history.settle_days(conn, written_before=day + DAY, limit=10)
    assert sorted(settled) == sorted(
        history.partition_name(table, day) for table in history.HISTORY_TABLES.values()
    )
    assert _vacuumed(conn, written)
    assert not _vacuumed(conn, later)  # its day is still being written
    assert history.settle_days(conn, written_before=day + DAY, limit=10) == []  # once
    # The reaper settles a partition a pass, once the day is past the hot window.
    assert keeper.prune(conn, now + 3 * DAY).settled == 1
