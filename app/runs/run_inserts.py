"""Inserting new runs in bulk: the rows a submit sends, and the ways it sends them.

A run to submit (`NewRun`) is checked against `app.core.limits`, written out as a JSON row and
inserted in pipelined chunks of JSON batches, or, for a large batch without idempotency
keys, COPied into a session staging table first. Inserting a new run is not a transition
of an existing one: `app.runs.transitions` decides each new run's first status (pending, blocked or
skipped) and calls these; the statements are in `app/core/sql/run_inserts.sql`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.rows import tuple_row

from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError, about
from app.core.json_rows import encode_json, iso_text, json_rows
from app.core.limits import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    DEFAULT_TIMEOUT_SECONDS,
)
from app.core.sql import query
from app.handlers.execution_models import ExecutionModel
from app.runs.counters import TRANSITIONS

SUBMIT_CHUNK = 2000  # runs per INSERT statement of a bulk submit
COPY_THRESHOLD = 1000  # from this many runs without keys, a bulk submit goes through COPY

EXECUTION_MODELS = frozenset(m.value for m in ExecutionModel)
# The ranges of app.core.limits (the run's fields declare the same), as pairs: a bulk submit checks
# thousands of runs against them.
PRIORITIES = (-limits.MAX_PRIORITY, limits.MAX_PRIORITY)
TIMEOUTS = (1, limits.MAX_DURATION_SECONDS)
RETRIES = (0, limits.MAX_RETRIES)
SUBMITTED = TRANSITIONS.labels("run_submit")


class SubmitError(UsageError):
    """A run cannot be submitted as asked; the message says why."""


class IdempotencyConflict(SubmitError):
    """The idempotency key already names a run with a different payload."""


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run to submit. `delay` (seconds from the database's now) or `run_at` delays it."""

    handler: str
    args: dict[str, Any] = field(default_factory=dict)
    priority: int = DEFAULT_PRIORITY
    delay: float | None = None
    run_at: datetime | None = None
    idempotency_key: str | None = None
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    max_retries: int = DEFAULT_MAX_RETRIES
    execution_model: str = ExecutionModel.ASYNC.value
    job_id: uuid.UUID | None = None
    queue: str = DEFAULT_QUEUE
    deadline: datetime | None = None  # not started by then: skipped, as expired

    def validate(self) -> None:
        """Refuse, with one sentence, anything outside the ranges of `app.core.limits`."""
        if self._plain():
            return
        try:
            self._check()
        except limits.LimitError as exc:
            raise SubmitError(str(exc), exc.field) from None

    def _plain(self) -> bool:
        """Most runs, told valid at a glance: a bulk submit validates thousands."""
        return (
            type(self.priority) is int
            and PRIORITIES[0] <= self.priority <= PRIORITIES[1]
            and type(self.timeout_seconds) is int
            and TIMEOUTS[0] <= self.timeout_seconds <= TIMEOUTS[1]
            and type(self.max_retries) is int
            and RETRIES[0] <= self.max_retries <= RETRIES[1]
            and self.delay is None
            and self.run_at is None
            and self.deadline is None
            and self.idempotency_key is None
            and self.execution_model in EXECUTION_MODELS
            and limits.plain_name(self.handler)
            and (self.queue == DEFAULT_QUEUE or limits.plain_name(self.queue))
            and type(self.args) is dict
            and limits.plain_args(self.args)
        )

    def _check(self) -> None:
        if not isinstance(self.handler, str) or not self.handler.strip():
            raise SubmitError("a run needs a handler name", "handler")
        with about("handler"):
            limits.check_name("the handler name", self.handler)
        if not isinstance(self.args, dict):
            raise SubmitError(f"args must be a JSON object, got {type(self.args).__name__}", "args")
        with about("args"):
            limits.check_args("args", self.args)
        if self.execution_model not in EXECUTION_MODELS:
            models = ", ".join(m.value for m in ExecutionModel)
            raise SubmitError(
                f"execution model must be one of {models}, got {self.execution_model!r}",
                "execution_model",
            )
        with about("priority"):
            limits.check_whole("priority", self.priority, *PRIORITIES)
        with about("timeout_seconds"):
            limits.check_whole("the timeout", self.timeout_seconds, *TIMEOUTS)
        with about("max_retries"):
            limits.check_whole("max retries", self.max_retries, *RETRIES)
        if self.delay is not None and self.run_at is not None:
            raise SubmitError("give a delay or a time to run at, not both", "run_at")
        if self.delay is not None:
            with about("delay_seconds"):
                limits.check_seconds("the delay", self.delay, 0)
        if self.run_at is not None:
            with about("run_at"):
                limits.check_instant("the time to run at", self.run_at)
        if self.deadline is not None:
            with about("deadline"):
                limits.check_instant("the deadline", self.deadline)
            if self.run_at is not None and self.deadline <= self.run_at:
                raise SubmitError("the deadline must come after the time to run at", "deadline")
        with about("queue"):
            limits.check_name("the queue name", self.queue)
        if self.idempotency_key is not None:
            with about("idempotency_key"):
                limits.check_name(
                    "the idempotency key", self.idempotency_key, limits.MAX_KEY_LENGTH
                )

    def as_row(self) -> dict[str, Any]:
        """Its JSON row for an insert. Null fields are left out (jsonb_to_recordset reads a
        missing key as NULL): most runs have no key, delay or start time, and a bulk
        submit then sends and parses far fewer bytes."""
        row: dict[str, Any] = {
            "handler": self.handler,
            "args": self.args,
            "execution_model": self.execution_model,
            "priority": self.priority,
            "max_retries": self.max_retries,
            "timeout_seconds": self.timeout_seconds,
        }
        if self.run_at is not None:
            row["run_at"] = self.run_at.isoformat()
        if self.delay is not None:
            row["delay"] = self.delay
        if self.deadline is not None:
            row["deadline"] = self.deadline.isoformat()
        if self.idempotency_key is not None:
            row["idempotency_key"] = self.idempotency_key
        if self.job_id is not None:
            row["job_id"] = str(self.job_id)
        if self.queue != DEFAULT_QUEUE:
            row["queue"] = self.queue
        return row

    def same_payload(self, handler: str, args: dict[str, Any]) -> bool:
        return self.handler == handler and self.args == args


@dataclass(frozen=True, slots=True)
class FireRequest:
    """A schedule's fire to turn into a run of its job definition (see the trigger)."""

    schedule_id: uuid.UUID
    job_id: uuid.UUID
    fire_time: datetime
    run_at: datetime

    def as_row(self, iso: dict[datetime, str]) -> dict[str, Any]:
        """Its JSON row; `iso` caches instants already written out (a batch of fires
        mostly shares one fire time)."""
        return {
            "schedule_id": str(self.schedule_id),
            "job_id": str(self.job_id),
            "fire_time": iso_text(iso, self.fire_time),
            "run_at": self.run_at.isoformat(),
        }


def copy_runs(conn: Conn, new_runs: list[NewRun], now: datetime | None) -> list[int]:
    """(new) -> pending for a large batch without idempotency keys: COPY into the session's
    staging table, then one INSERT from it. Ids in input order."""
    conn.execute(query("run_inserts", "run_stage_prepare"))
    with conn.cursor().copy(query("run_inserts", "run_stage_copy")) as copy:
        for n, run in enumerate(new_runs):
            args = _args_json(run.handler, run.args) if run.args else "{}"
            copy.write_row(
                (
                    n,
                    run.handler,
                    args,
                    run.execution_model,
                    run.priority,
                    run.run_at,
                    run.delay,
                    run.max_retries,
                    run.timeout_seconds,
                    run.job_id,
                    run.queue,
                    run.deadline,
                )
            )
    cursor = conn.cursor(row_factory=tuple_row)
    rows = cursor.execute(query("run_inserts", "run_submit_staged"), {"now": now}).fetchall()
    ids = [run_id for (run_id,) in rows]
    SUBMITTED.inc(len(ids))
    return ids


def run_row(run: NewRun, **extra: Any) -> dict[str, Any]:
    """The JSON row of a run; `extra` sets status, dag_run_id, upstream_remaining, …"""
    row = run.as_row()
    row.update((key, value) for key, value in extra.items() if value is not None)
    return row


def insert_runs(
    conn: Conn, rows: list[dict[str, Any]], now: datetime | None
) -> list[tuple[int, str | None]]:
    """(new) -> pending | blocked | skipped: insert rows, (id, idempotency key) in order.

    Pipelined chunks: Python encodes the next chunk while the server inserts this one.
    A single chunk is one plain statement (no pipeline to open and sync).
    """
    if not rows:
        return []
    if len(rows) <= SUBMIT_CHUNK:
        with conn.cursor(row_factory=tuple_row) as cursor:
            params = {"runs": _rows_json(rows), "now": now}
            one_chunk = cursor.execute(query("run_inserts", "run_submit_many"), params).fetchall()
        SUBMITTED.inc(len(one_chunk))
        return one_chunk
    chunks = [rows[i : i + SUBMIT_CHUNK] for i in range(0, len(rows), SUBMIT_CHUNK)]
    with conn.pipeline():
        cursors = [conn.cursor(row_factory=tuple_row) for _ in chunks]
        for cursor, chunk in zip(cursors, chunks, strict=True):
            cursor.execute(
                query("run_inserts", "run_submit_many"), {"runs": _rows_json(chunk), "now": now}
            )
    inserted: list[tuple[int, str | None]] = []
    for cursor in cursors:
        inserted += cursor.fetchall()
    SUBMITTED.inc(len(inserted))
    return inserted


def insert_one(conn: Conn, run: NewRun, now: datetime | None) -> list[tuple[int, str | None]]:
    """(new) -> pending for one run, its values sent as parameters: (id, idempotency key),
    or nothing when its key is already taken."""
    params = {
        "handler": run.handler,
        "args": _args_json(run.handler, run.args),
        "execution_model": run.execution_model,
        "priority": run.priority,
        "run_at": run.run_at,
        "delay": run.delay,
        "max_retries": run.max_retries,
        "timeout_seconds": run.timeout_seconds,
        "idempotency_key": run.idempotency_key,
        "job_id": run.job_id,
        "queue": run.queue,
        "deadline": run.deadline,
        "now": now,
    }
    with conn.cursor(row_factory=tuple_row) as cursor:
        inserted = cursor.execute(query("run_inserts", "run_submit_one"), params).fetchall()
    SUBMITTED.inc(len(inserted))
    return inserted


def _args_json(handler: str, args: dict[str, Any]) -> str:
    try:
        return encode_json(args)
    except (TypeError, ValueError) as exc:
        raise SubmitError(f"args of a {handler!r} run must be JSON-serialisable: {exc}") from None


def _rows_json(rows: list[dict[str, Any]]) -> str:
    try:
        return json_rows(rows)
    except (TypeError, ValueError):
        for row in rows:
            _args_json(row["handler"], row["args"])
        raise


def insert_fires(conn: Conn, fires: Sequence[FireRequest]) -> list[int | None]:
    """(new) -> pending, one run per fire, in input order; None where that fire already
    has a run."""
    if not fires:
        return []
    iso: dict[datetime, str] = {}
    params = {"fires": json_rows([f.as_row(iso) for f in fires]), "shared": None}
    # Plain tuples: a batch of fires returns thousands of rows, and dicts cost more.
    with conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(query("run_inserts", "run_submit_fires"), params).fetchall()
    SUBMITTED.inc(len(rows))
    created = {(schedule_id, fire_time): run_id for run_id, schedule_id, fire_time in rows}
    return [created.get((f.schedule_id, f.fire_time)) for f in fires]


def insert_fire_rows(conn: Conn, fires_json: str, shared_json: str | None) -> Callable[[], int]:
    """(new) -> pending, one run per fire of the trigger's batch that asks for one and per
    schedule of its shared fires (the statement of `insert_fires`), queued on `conn`: in a
    pipeline it goes out with the statements after it. Call the result, after the
    pipeline, for how many runs it made (counted, not read: the rows are never turned into
    Python objects)."""
    cursor = conn.cursor(row_factory=tuple_row)
    params = {"fires": fires_json, "shared": shared_json}
    cursor.execute(query("run_inserts", "run_submit_fires"), params)

    def created() -> int:
        count = max(cursor.rowcount, 0)
        SUBMITTED.inc(count)
        return count

    return created
