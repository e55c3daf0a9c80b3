"""A plain submit is one round trip: no BEGIN/COMMIT around its single INSERT, and every
guarantee of a submit kept (commit, wake-up NOTIFY, idempotency, a caller's transaction).

Round trips are counted from libpq's protocol trace: each Sync (extended protocol) or
Query (simple protocol) the client sends is one wait for the server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq
from psycopg.rows import dict_row

from app.client import Sundial
from app.runs import run_inserts, submission, transitions
from app.runs.run_inserts import IdempotencyConflict, NewRun

Conn = psycopg.Connection[Any]


@contextmanager
def traced(conn: Conn, path: Path) -> Iterator[Callable[[], list[str]]]:
    """Trace the connection's protocol messages; yields a reader of the frontend messages
    (type and text), valid once the block has ended."""
    with path.open("w") as trace_file:
        conn.pgconn.trace(trace_file.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield lambda: sent_messages(path)
        finally:
            conn.pgconn.untrace()


def sent_messages(path: Path) -> list[str]:
    messages = []
    for line in path.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0] == "F":
            messages.append("\t".join(fields[2:]))
    return messages


def round_trips(messages: list[str]) -> int:
    return sum(1 for m in messages if m.startswith(("Sync", "Query")))


def plain_statements(messages: list[str]) -> list[str]:
    """The text of simple-protocol queries (psycopg sends BEGIN and COMMIT that way)."""
    return [m for m in messages if m.startswith("Query")]


def count_runs(db_url: str) -> int:
    with psycopg.connect(db_url, row_factory=dict_row) as other:
        row = other.execute("SELECT count(*) AS n FROM job_runs").fetchone()
    assert row is not None
    return int(row["n"])


def test_a_fresh_clients_first_submit_is_one_round_trip_and_committed(
    db_url: str, tmp_path: Path
) -> None:
    with Sundial(db_url) as client:
        with traced(client.conn, tmp_path / "trace") as sent:
            run_id = client.submit("noop", {"n": 1})
        messages = sent()
        assert round_trips(messages) == 1, messages
        assert plain_statements(messages) == []
        assert client.get(run_id) is not None
    assert count_runs(db_url) == 1  # seen from another connection: committed


def test_steady_submits_cost_one_round_trip_each(db_url: str, tmp_path: Path) -> None:
    with Sundial(db_url) as client:
        for n in range(8):  # past psycopg's prepare threshold: the statement is prepared
            client.submit("noop", {"n": n})
        with traced(client.conn, tmp_path / "trace") as sent:
            ids = [client.submit("noop", {"n": n}) for n in range(10)]
        messages = sent()
    assert round_trips(messages) == 10, messages
    assert plain_statements(messages) == []
    assert ids == sorted(ids) and len(set(ids)) == 10
    assert count_runs(db_url) == 18


def test_a_single_submit_still_wakes_listening_workers(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as listener, Sundial(db_url) as client:
        listener.execute(f"LISTEN {transitions.NOTIFY_CHANNEL}")
        client.submit("noop")
        woken = list(listener.notifies(timeout=10, stop_after=1))
    assert [n.channel for n in woken] == [transitions.NOTIFY_CHANNEL]
    assert woken[0].payload == ""  # never job args


def test_a_keyed_submit_is_one_round_trip_when_new_and_finds_its_run_again(
    conn: Conn, tmp_path: Path
) -> None:
    with traced(conn, tmp_path / "trace") as sent:
        first = submission.submit(conn, NewRun("noop", {"a": 1}, idempotency_key="k"))
    assert round_trips(sent()) == 1
    again = submission.submit(conn, NewRun("noop", {"a": 1}, idempotency_key="k"))
    assert (again.id, again.created) == (first.id, False)
    with pytest.raises(IdempotencyConflict, match="already belongs to run"):
        submission.submit(conn, NewRun("noop", {"a": 2}, idempotency_key="k"))
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 1}


def test_a_batch_with_a_clashing_key_still_writes_nothing(conn: Conn) -> None:
    submission.submit(conn, NewRun("noop", {"a": 1}, idempotency_key="taken"))
    batch = [NewRun("noop"), NewRun("noop", {"a": 2}, idempotency_key="taken")]
    with pytest.raises(IdempotencyConflict):
        submission.submit_many(conn, batch)
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 1}


def test_a_submit_inside_a_callers_transaction_goes_with_it(conn: Conn) -> None:
    with conn.transaction(force_rollback=True):
        submission.submit(conn, NewRun("noop"))
        assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 1}
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 0}


def test_a_submit_on_a_connection_without_autocommit_commits_as_before(db_url: str) -> None:
    with psycopg.connect(db_url, row_factory=dict_row) as manual:
        submission.submit(manual, NewRun("noop"))
        assert manual.info.transaction_status == pq.TransactionStatus.IDLE
    assert count_runs(db_url) == 1


SAME_ROW = (
    "handler, args, execution_model, priority, base_priority, max_retries, timeout_seconds, "
    "idempotency_key, job_id, status, attempt, upstream_remaining, dag_run_id, schedule_id"
)


@pytest.mark.parametrize(
    "run",
    [
        NewRun("noop"),
        NewRun(
            "noop",
            {"nested": {"list": [1, 2.5, None, "é"]}, "flag": True},
            priority=-7,
            timeout_seconds=90,
            max_retries=0,
            execution_model="process",
            idempotency_key="key-1",
        ),
        NewRun("noop", delay=3600.5),
        NewRun("noop", run_at=datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)),
    ],
    ids=["plain", "every-field", "delayed", "at-a-time"],
)
def test_a_single_submit_writes_the_row_a_batch_would(conn: Conn, run: NewRun) -> None:
    """A single submit has its own statement (values as parameters, no JSON batch): the run
    it writes must be the one the batch statement writes for the same request."""
    now = datetime(2030, 1, 1, 12, tzinfo=UTC)
    (alone,) = submission.submit_many(conn, [run], now=now)
    twin = dataclasses.replace(run, idempotency_key=run.idempotency_key and "key-2")
    batch = submission.submit_many(conn, [twin, NewRun("noop")], now=now)
    rows = {
        r["id"]: r
        for r in conn.execute(
            f"SELECT id, run_at, {SAME_ROW} FROM job_runs WHERE id = ANY(%s)",
            ([alone.id, batch[0].id],),
        ).fetchall()
    }
    single, batched = rows[alone.id], rows[batch[0].id]
    assert {**single, "id": 0, "idempotency_key": None} == {
        **batched,
        "id": 0,
        "idempotency_key": None,
    }
    assert single["idempotency_key"] == run.idempotency_key
    expected_at = run.run_at or now + timedelta(seconds=run.delay or 0)
    assert single["run_at"] == expected_at


def test_a_single_submit_refuses_args_json_cannot_carry(conn: Conn) -> None:
    with pytest.raises(run_inserts.SubmitError, match="JSON"):
        submission.submit(conn, NewRun("noop", {"when": object()}))
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 0}
