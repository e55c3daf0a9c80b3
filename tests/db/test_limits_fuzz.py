"""Generated input through submit, schedule add/update and DAG submit: each is either
refused with the project's clear error (a UsageError, never a driver or JSON exception)
with nothing written, or accepted and read back unchanged.

An accepted submission then goes through every stage in `RUN_STAGES` (each gets the
connection and the accepted run ids): more stages, such as running the runs through a
real worker, are added there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from app.core.errors import UsageError
from app.dags import dag_submission
from app.runs import submission
from app.runs.run_inserts import NewRun
from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleSpec

Conn = psycopg.Connection[dict[str, Any]]
Stage = Callable[[Conn, Sequence[int]], None]

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Any code point, lone surrogates and NUL included.
any_text = st.text(st.characters(codec=None, categories=None), max_size=12)
# Valid values half of the time, so that whole submissions are accepted often enough.
valid_names = st.sampled_from(["noop", "step-1", "é"])
names = st.one_of(valid_names, valid_names, st.sampled_from([" ", "", "x" * 201]), any_text)
small = st.integers(1, 100)
whole = st.one_of(
    small,
    small,
    small,
    st.integers(-3, 3),
    st.sampled_from([2**15 - 1, 2**15, 2**31 - 1, 2**31, 2**63, -(2**63) - 1, 10**4000]),
    st.integers(),
)
seconds = st.one_of(
    st.floats(0, 1e6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1e308, 315360001.0]),
)
zones = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))])
# Hypothesis takes naive bounds and attaches the zones itself.
supported = (datetime(1971, 1, 1), datetime(2199, 1, 1))  # noqa: DTZ001
instants = st.one_of(
    st.datetimes(*supported, timezones=zones),
    st.datetimes(timezones=zones),
)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


json_leaves = st.one_of(
    st.none(), st.booleans(), whole, st.floats(allow_nan=True, allow_infinity=True), any_text
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=8,
)
plain_json = st.recursive(
    st.one_of(st.none(), st.booleans(), small, st.floats(allow_nan=False), st.text(max_size=5)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
args_docs = st.one_of(
    st.dictionaries(st.text(max_size=5), plain_json, max_size=4),
    st.dictionaries(st.text(max_size=5), plain_json, max_size=4),
    st.dictionaries(any_text, json_values, max_size=4),
    st.integers(1, 100).map(lambda depth: {"deep": _nested(depth)}),
)


def _check_accepted_runs(conn: Conn, run_ids: Sequence[int]) -> None:
    """Every accepted run can be read back, dates and all (what `sundial show` does)."""
    rows = conn.execute("SELECT * FROM job_runs WHERE id = ANY(%s)", (list(run_ids),)).fetchall()
    assert len(rows) == len(run_ids)


RUN_STAGES: list[Stage] = [_check_accepted_runs]


def _counts(conn: Conn) -> tuple[int, ...]:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM job_runs) AS runs, (SELECT count(*) FROM dag_runs) AS dags,"
        " (SELECT count(*) FROM schedules) AS schedules,"
        " (SELECT count(*) FROM job_definitions) AS jobs"
    ).fetchone()
    assert row is not None
    return tuple(row.values())


def _stored(conn: Conn, run_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM job_runs WHERE id = %s", (run_id,)).fetchone()
    assert row is not None
    return row


@FUZZ
@given(
    handler=names,
    args=args_docs,
    priority=whole,
    timeout=whole,
    retries=whole,
    delay=st.one_of(st.none(), st.none(), seconds),
    run_at=st.one_of(st.none(), st.none(), instants),
    key=st.one_of(st.none(), st.none(), names),
)
def test_submit_refuses_clearly_or_round_trips(
    conn: Conn,
    handler: str,
    args: dict[str, Any],
    priority: int,
    timeout: int,
    retries: int,
    delay: float | None,
    run_at: datetime | None,
    key: str | None,
) -> None:
    if delay is not None and run_at is not None:
        run_at = None
    run = NewRun(handler, args, priority, delay, run_at, key, timeout, retries)
    before = _counts(conn)
    try:
        submitted = submission.submit(conn, run)
    except UsageError as refused:
        event("refused")
        assert "\n" not in str(refused)
        assert _counts(conn) == before
        return
    event("accepted")
    run_id = submitted.id
    row = _stored(conn, run_id)
    if not submitted.created:  # the key named a run of an earlier example, with these args
        assert (row["idempotency_key"], row["handler"], row["args"]) == (key, handler, args)
        return
    assert (row["handler"], row["args"], row["priority"]) == (handler, args, priority)
    assert (row["timeout_seconds"], row["max_retries"]) == (timeout, retries)
    assert row["idempotency_key"] == key
    if run_at is not None:
        assert row["run_at"] == run_at
    for stage in RUN_STAGES:
        stage(conn, [run_id])


@FUZZ
@given(nodes=st.dictionaries(names, st.tuples(names, args_docs), min_size=1, max_size=3))
def test_dag_submit_refuses_clearly_or_round_trips(
    conn: Conn, nodes: dict[str, tuple[str, dict[str, Any]]]
) -> None:
    before = _counts(conn)
    try:
        dag = dag_submission.submit_dag(conn, {n: NewRun(h, a) for n, (h, a) in nodes.items()}, [])
    except UsageError as refused:
        event("refused")
        assert "\n" not in str(refused)
        assert _counts(conn) == before
        return
    event("accepted")
    rows = conn.execute(
        "SELECT dag_node, handler, args FROM job_runs WHERE dag_run_id = %s", (dag.id,)
    ).fetchall()
    assert {r["dag_node"]: (r["handler"], r["args"]) for r in rows} == nodes
    for stage in RUN_STAGES:
        stage(conn, list(dag.run_ids.values()))


@FUZZ
@given(
    name=names,
    every=whole,
    spread=whole,
    limit=st.one_of(st.none(), st.none(), whole),
    start=st.one_of(st.none(), st.none(), instants),
    args=args_docs,
    change=st.sampled_from(["every_seconds", "spread_seconds", "start_at", "auto_pause_after"]),
    changed_to=st.one_of(whole, instants, st.none()),
)
def test_schedule_add_and_update_refuse_clearly_or_round_trip(
    conn: Conn,
    name: str,
    every: int,
    spread: int,
    limit: int | None,
    start: datetime | None,
    args: dict[str, Any],
    change: str,
    changed_to: Any,
) -> None:
    conn.execute("DELETE FROM schedules")
    conn.execute("DELETE FROM job_definitions")
    spec = ScheduleSpec.model_construct(
        name=name,
        every_seconds=every,
        spread_seconds=spread,
        catchup=limit is not None,
        catchup_limit=limit,
        start_at=start,
        handler="noop",
        args=args,
    )
    try:
        schedules.create_schedule(conn, spec)
    except UsageError as refused:
        event("refused")
        assert "\n" not in str(refused)
        assert _counts(conn) == (0, 0, 0, 0)
        return
    event("added")
    row = conn.execute("SELECT * FROM schedules").fetchone()
    assert row is not None
    assert (row["name"], row["interval_seconds"], row["spread_seconds"]) == (name, every, spread)
    assert (row["catchup_limit"], row["start_at"]) == (limit, start)
    job = conn.execute("SELECT args FROM job_definitions").fetchone()
    assert job == {"args": args}
    try:
        schedules.update_schedule(conn, name, {change: changed_to})
    except UsageError as refused:
        event("refused")
        assert "\n" not in str(refused)
        assert conn.execute("SELECT * FROM schedules").fetchone() == row
        return
    event("updated")
    column = "interval_seconds" if change == "every_seconds" else change
    after = conn.execute(f"SELECT {column} AS value FROM schedules").fetchone()
    assert after == {"value": changed_to}
