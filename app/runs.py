"""The run state machine: the only code that changes a run's status.

One function per transition, named like its SQL statement in `app/sql/runs.sql`; each is
one conditional statement. When a fenced transition changes fewer rows than asked, the
actor lost a race (its lease expired, the run was cancelled or reaped): the loser is
logged and counted here, and the caller discards its result.

Functions take a psycopg connection and do not commit, except where noted: callers own
their transactions (the trigger inserts fires and advances schedules in one).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from app import limits
from app.backoff import full_jitter
from app.errors import UsageError
from app.handlers.gate import refuse_disabled_handlers
from app.jobs import JSON, JobSpec, Outcome, OutcomeStatus
from app.json_rows import encode_json, iso_text, json_rows
from app.metrics import FENCE_LOST, TRANSITIONS
from app.sql import query
from app.states import ACTIVE, ExecutionModel

log = logging.getLogger(__name__)

Conn = psycopg.Connection[dict[str, Any]]

DEFAULT_PRIORITY = 1
DEFAULT_TIMEOUT_SECONDS = 300
DEFAULT_MAX_RETRIES = 3
MAX_PRIORITY = limits.MAX_PRIORITY
RETRY_BASE_DELAY_SECONDS = 1.0
RETRY_MAX_DELAY_SECONDS = 600.0
NOTIFY_CHANNEL = "sundial_runs"
SUBMIT_CHUNK = 2000  # runs per INSERT statement of a bulk submit
COPY_THRESHOLD = 1000  # from this many runs without keys, a bulk submit goes through COPY


EXECUTION_MODELS = frozenset(m.value for m in ExecutionModel)


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

    def validate(self) -> None:
        """Refuse, with one sentence, anything outside the ranges of `app.limits`."""
        if self._plain():
            return
        try:
            self._check()
        except limits.LimitError as exc:
            raise SubmitError(str(exc)) from None

    def _plain(self) -> bool:
        """Most runs, told valid at a glance: a bulk submit validates thousands."""
        return (
            type(self.priority) is int
            and -MAX_PRIORITY <= self.priority <= MAX_PRIORITY
            and type(self.timeout_seconds) is int
            and 1 <= self.timeout_seconds <= limits.MAX_DURATION_SECONDS
            and type(self.max_retries) is int
            and 0 <= self.max_retries <= limits.MAX_RETRIES
            and self.delay is None
            and self.run_at is None
            and self.idempotency_key is None
            and self.execution_model in EXECUTION_MODELS
            and limits.plain_text(self.handler, limits.MAX_NAME_LENGTH)
            and bool(self.handler.strip())
            and type(self.args) is dict
            and limits.plain_args(self.args)
        )

    def _check(self) -> None:
        if not isinstance(self.handler, str) or not self.handler.strip():
            raise SubmitError("a run needs a handler name")
        limits.check_name("the handler name", self.handler)
        if not isinstance(self.args, dict):
            raise SubmitError(f"args must be a JSON object, got {type(self.args).__name__}")
        limits.check_args("args", self.args)
        if self.execution_model not in EXECUTION_MODELS:
            models = ", ".join(m.value for m in ExecutionModel)
            raise SubmitError(
                f"execution model must be one of {models}, got {self.execution_model!r}"
            )
        limits.check_whole("priority", self.priority, -MAX_PRIORITY, MAX_PRIORITY)
        limits.check_whole("the timeout", self.timeout_seconds, 1, limits.MAX_DURATION_SECONDS)
        limits.check_whole("max retries", self.max_retries, 0, limits.MAX_RETRIES)
        if self.delay is not None and self.run_at is not None:
            raise SubmitError("give a delay or a time to run at, not both")
        if self.delay is not None:
            limits.check_seconds("the delay", self.delay, 0)
        if self.run_at is not None:
            limits.check_instant("the time to run at", self.run_at)
        if self.idempotency_key is not None:
            limits.check_name("the idempotency key", self.idempotency_key, limits.MAX_KEY_LENGTH)

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
        if self.idempotency_key is not None:
            row["idempotency_key"] = self.idempotency_key
        if self.job_id is not None:
            row["job_id"] = str(self.job_id)
        return row

    def same_payload(self, handler: str, args: dict[str, Any]) -> bool:
        return self.handler == handler and self.args == args


@dataclass(frozen=True, slots=True)
class Submitted:
    id: int
    created: bool  # False: the idempotency key named an existing run with this payload


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


@dataclass(frozen=True, slots=True)
class Finish:
    """How one attempt ended, as the worker reports it."""

    run_id: int
    attempt: int
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """Attempts as (run id, attempt): a report about one attempt never touches another."""

    renewed: set[tuple[int, int]]
    cancel_requested: set[tuple[int, int]]
    lost: set[tuple[int, int]]  # no longer leased to this worker: stop the job, drop its result


def _now(now: datetime | None) -> dict[str, datetime | None]:
    return {"now": now}


# ---- submit ------------------------------------------------------------------------------


def submit(conn: Conn, run: NewRun, *, now: datetime | None = None) -> Submitted:
    """(new) -> pending. The same idempotency key and payload returns the existing run."""
    return submit_many(conn, [run], now=now)[0]


def submit_many(
    conn: Conn, runs: Sequence[NewRun], *, now: datetime | None = None
) -> list[Submitted]:
    """(new) -> pending for many runs in one statement, results in input order.

    Raises IdempotencyConflict, changing nothing, when a key is reused with another payload
    (within the batch or against an existing run).
    """
    for run in runs:
        run.validate()
    refuse_disabled_handlers(conn, {run.handler for run in runs})
    by_key: dict[str, NewRun] = {}
    for run in runs:
        key = run.idempotency_key
        if key is None:
            continue
        if key in by_key and not by_key[key].same_payload(run.handler, run.args):
            raise IdempotencyConflict(
                f"idempotency key {key!r} is used twice in this batch with different payloads"
            )
        by_key[key] = run
    unkeyed = [r for r in runs if r.idempotency_key is None]
    keyed = list(by_key.values())
    with conn.transaction():
        rows: list[tuple[int, str | None]]
        if len(unkeyed) >= COPY_THRESHOLD:
            rows = [(run_id, None) for run_id in _copy_runs(conn, unkeyed, now)]
            rows += _insert_runs(conn, [r.as_row() for r in keyed], now) if keyed else []
        else:
            rows = _insert_runs(conn, [r.as_row() for r in unkeyed + keyed], now)
        created_by_key = {key: run_id for run_id, key in rows if key is not None}
        # Ids come from one sequence in insertion order, so unkeyed runs map in order.
        unkeyed_ids = iter(run_id for run_id, key in rows if key is None)
        existing = _existing_runs_for(conn, by_key, created_by_key)
    result: list[Submitted] = []
    for run in runs:
        key = run.idempotency_key
        if key is None:
            result.append(Submitted(next(unkeyed_ids), created=True))
        elif key in created_by_key:
            result.append(Submitted(created_by_key[key], created=True))
        else:
            result.append(Submitted(existing[key], created=False))
    return result


def _copy_runs(conn: Conn, new_runs: list[NewRun], now: datetime | None) -> list[int]:
    """(new) -> pending for a large batch without idempotency keys: COPY into the session's
    staging table, then one INSERT from it. Ids in input order."""
    conn.execute(query("runs", "run_stage_prepare"))
    with conn.cursor().copy(query("runs", "run_stage_copy")) as copy:
        for n, run in enumerate(new_runs):
            try:
                args = encode_json(run.args) if run.args else "{}"
            except (TypeError, ValueError) as exc:
                raise SubmitError(
                    f"args of a {run.handler!r} run must be JSON-serialisable: {exc}"
                ) from None
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
                )
            )
    cursor = conn.cursor(row_factory=tuple_row)
    rows = cursor.execute(query("runs", "run_submit_staged"), _now(now)).fetchall()
    ids = [run_id for (run_id,) in rows]
    TRANSITIONS.labels("run_submit").inc(len(ids))
    return ids


def _run_row(run: NewRun, **extra: Any) -> dict[str, Any]:
    """The JSON row of a run; `extra` sets status, dag_run_id, upstream_remaining, …"""
    row = run.as_row()
    row.update((key, value) for key, value in extra.items() if value is not None)
    return row


def _insert_runs(
    conn: Conn, rows: list[dict[str, Any]], now: datetime | None
) -> list[tuple[int, str | None]]:
    """(new) -> pending | blocked | skipped: insert rows, (id, idempotency key) in order.

    Pipelined chunks: Python encodes the next chunk while the server inserts this one.
    """
    chunks = [rows[i : i + SUBMIT_CHUNK] for i in range(0, len(rows), SUBMIT_CHUNK)]
    with conn.pipeline():
        cursors = [conn.cursor(row_factory=tuple_row) for _ in chunks]
        for cursor, chunk in zip(cursors, chunks, strict=True):
            cursor.execute(
                query("runs", "run_submit_many"), {"runs": _rows_json(chunk), **_now(now)}
            )
    inserted: list[tuple[int, str | None]] = []
    for cursor in cursors:
        inserted += cursor.fetchall()
    TRANSITIONS.labels("run_submit").inc(len(inserted))
    return inserted


def _rows_json(rows: list[dict[str, Any]]) -> str:
    try:
        return json_rows(rows)
    except (TypeError, ValueError):
        for row in rows:
            try:
                json.dumps(row["args"])
            except (TypeError, ValueError) as exc:
                raise SubmitError(
                    f"args of a {row['handler']!r} run must be JSON-serialisable: {exc}"
                ) from None
        raise


def _existing_runs_for(
    conn: Conn, by_key: dict[str, NewRun], created_by_key: dict[str, int]
) -> dict[str, int]:
    """Ids of runs that already held keys in this batch; refuses a different payload."""
    clashing = [key for key in by_key if key not in created_by_key]
    if not clashing:
        return {}
    rows = conn.execute(query("runs", "run_find_by_keys"), {"keys": clashing}).fetchall()
    existing: dict[str, int] = {}
    for row in rows:
        key = row["idempotency_key"]
        if not by_key[key].same_payload(row["handler"], row["args"]):
            raise IdempotencyConflict(
                f"idempotency key {key!r} already belongs to run {row['id']} "
                f"({row['handler']} with other args); use a new key for a different job"
            )
        existing[key] = row["id"]
    return existing


def submit_fires(conn: Conn, fires: Sequence[FireRequest]) -> list[int | None]:
    """(new) -> pending, one run per fire; None where that fire already has a run."""
    if not fires:
        return []
    iso: dict[datetime, str] = {}
    params = {"fires": json_rows([f.as_row(iso) for f in fires])}
    # Plain tuples: a batch of fires returns thousands of rows, and dicts cost more.
    with conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(query("runs", "run_submit_fires"), params).fetchall()
    TRANSITIONS.labels("run_submit").inc(len(rows))
    created = {(schedule_id, fire_time): run_id for run_id, schedule_id, fire_time in rows}
    return [created.get((f.schedule_id, f.fire_time)) for f in fires]


# ---- worker: claim, heartbeat, finish, release -------------------------------------------


def claim(
    conn: Conn,
    worker: str,
    limit: int,
    lease_seconds: float,
    *,
    now: datetime | None = None,
) -> list[JobSpec]:
    """pending -> running for up to `limit` due runs, leased to `worker`."""
    if limit <= 0:
        return []
    rows = conn.execute(
        query("runs", "run_claim"),
        {"worker": worker, "limit": limit, "lease_seconds": lease_seconds, **_now(now)},
    ).fetchall()
    TRANSITIONS.labels("run_claim").inc(len(rows))
    rows.sort(key=lambda r: (-r["priority"], r["run_at"]))  # start in claim order
    return [
        JobSpec(
            run_id=r["id"],
            attempt=r["attempt"],
            handler=r["handler"],
            args=r["args"],
            execution_model=r["execution_model"],
            timeout_seconds=float(r["timeout_seconds"]),
            idempotency_key=r["idempotency_key"],
            fire_time=r["fire_time"],
            upstream_results=r["upstream_results"],
        )
        for r in rows
    ]


def heartbeat(
    conn: Conn, worker: str, held: Sequence[tuple[int, int]], lease_seconds: float
) -> HeartbeatResult:
    """running -> running: renew every (run id, attempt) lease `worker` holds."""
    if not held:
        return HeartbeatResult(set(), set(), set())
    params = {
        "worker": worker,
        "ids": [h[0] for h in held],
        "attempts": [h[1] for h in held],
        "lease_seconds": lease_seconds,
    }
    rows = conn.execute(query("runs", "run_heartbeat"), params).fetchall()
    renewed = {(r["id"], r["attempt"]) for r in rows}
    cancel = {(r["id"], r["attempt"]) for r in rows if r["cancel_requested"]}
    missing = [h for h in held if h not in renewed]
    lost: set[tuple[int, int]] = set()
    if missing:
        # Skipped because another statement holds the row lock, or really lost? Lost may
        # also mean just finished by this worker: the worker tells them apart (it alone
        # knows what is still running), so nothing is logged here.
        still_held = conn.execute(
            query("runs", "run_held_check"),
            {**params, "ids": [m[0] for m in missing], "attempts": [m[1] for m in missing]},
        ).fetchall()
        cancel |= {(r["id"], r["attempt"]) for r in still_held if r["cancel_requested"]}
        lost = set(missing) - {(r["id"], r["attempt"]) for r in still_held}
    return HeartbeatResult(renewed, cancel, lost)


def count_lease_lost() -> None:
    """The worker found (by heartbeat) that a running attempt no longer holds its run."""
    FENCE_LOST.labels("run_heartbeat").inc()


def finish_many(conn: Conn, worker: str, finishes: Sequence[Finish]) -> list[Finish]:
    """Record how attempts ended: running -> completed, or -> pending (retry) / failed /
    timed_out / cancelled. Returns the finishes that won; the rest lost their fence.

    Completions and failures go in (at most) two statements, in one transaction.
    """
    completed = [f for f in finishes if f.outcome.status is OutcomeStatus.COMPLETED]
    failed = [f for f in finishes if f.outcome.status is not OutcomeStatus.COMPLETED]
    won: set[tuple[int, int]] = set()
    with conn.transaction():
        if completed:
            rows = conn.execute(
                query("runs", "run_complete_many"),
                {
                    "worker": worker,
                    "ids": [f.run_id for f in completed],
                    "attempts": [f.attempt for f in completed],
                    "results": [_result_json(f.outcome.result) for f in completed],
                },
            ).fetchall()
            won |= {(r["id"], r["attempt"]) for r in rows}
            TRANSITIONS.labels("run_complete").inc(len(rows))
            _settle_downstream(conn, completed=[r["id"] for r in rows if r["in_dag"]])
        if failed:
            rows = conn.execute(
                query("runs", "run_fail_many"),
                {
                    "worker": worker,
                    "ids": [f.run_id for f in failed],
                    "attempts": [f.attempt for f in failed],
                    "outcomes": [f.outcome.status.value for f in failed],
                    "errors": [f.outcome.error for f in failed],
                    "tracebacks": [f.outcome.traceback for f in failed],
                    "retryable": [f.outcome.retryable for f in failed],
                    "delays": [
                        full_jitter(f.attempt, RETRY_BASE_DELAY_SECONDS, RETRY_MAX_DELAY_SECONDS)
                        for f in failed
                    ],
                },
            ).fetchall()
            won |= {(r["id"], r["attempt"]) for r in rows}
            TRANSITIONS.labels("run_fail").inc(len(rows))
            _settle_downstream(conn, ended=_ended_in_dag(rows))
    late = [f for f in completed if (f.run_id, f.attempt) not in won]
    won |= {(f.run_id, f.attempt) for f in complete_late(conn, worker, late)}
    winners = [f for f in finishes if (f.run_id, f.attempt) in won]
    for f in finishes:
        if (f.run_id, f.attempt) not in won:
            _lost("run_finish", f.run_id, f.attempt, worker)
    return winners


def complete_late(conn: Conn, worker: str, finishes: Sequence[Finish]) -> list[Finish]:
    """pending | failed -> completed for completions that lost their fence only because
    the reaper declared the attempt dead meanwhile (its lease expired, e.g. while the
    database was unreachable) and no newer attempt exists. Returns those accepted.

    In a DAG, the steps the reaper's verdict skipped wait again and are released in the
    same transaction, as if the completion had come in time. One transaction per run: a
    DAG step changing at that very moment leaves that completion refused, as before.
    """
    accepted = []
    for f in finishes:
        params = {"id": f.run_id, "attempt": f.attempt, "worker": worker}
        try:
            with conn.transaction():
                row = conn.execute(
                    query("runs", "run_complete_late"),
                    {**params, "result": _result_json(f.outcome.result)},
                ).fetchone()
                if row is None:
                    continue
                if row["in_dag"]:
                    unskipped = _unskip_downstream(conn, f.run_id)
                    TRANSITIONS.labels("run_unskip").inc(len(unskipped))
                    _settle_downstream(conn, completed=[f.run_id])
        except psycopg.errors.LockNotAvailable:
            continue
        TRANSITIONS.labels("run_complete_late").inc()
        log.info(
            "completion recorded late: the attempt had been declared dead, none newer exists",
            extra={"run_id": f.run_id, "attempt": f.attempt, "worker": worker},
        )
        accepted.append(f)
    return accepted


def _result_json(result: JSON) -> Jsonb | None:
    return None if result is None else Jsonb(result)


def release_many(conn: Conn, worker: str, held: Sequence[tuple[int, int]]) -> list[int]:
    """running -> pending: hand unfinished attempts back at shutdown (not a used attempt)."""
    if not held:
        return []
    with conn.transaction():
        rows = conn.execute(
            query("runs", "run_release_many"),
            {"worker": worker, "ids": [h[0] for h in held], "attempts": [h[1] for h in held]},
        ).fetchall()
        _settle_downstream(conn, ended=_ended_in_dag(rows))
    TRANSITIONS.labels("run_release").inc(len(rows))
    released = {r["id"] for r in rows}
    for run_id, attempt in held:
        if run_id not in released:
            _lost("run_release", run_id, attempt, worker)
    return sorted(released)


# ---- reaper ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reaped:
    run_id: int
    attempt: int
    status: str
    worker: str | None


def reap(conn: Conn, *, limit: int = 1000, now: datetime | None = None) -> list[Reaped]:
    """running -> pending | failed | cancelled for runs whose lease has expired."""
    with conn.transaction():
        rows = conn.execute(query("runs", "run_reap"), {"limit": limit, **_now(now)}).fetchall()
        _settle_downstream(conn, ended=_ended_in_dag(rows))
    TRANSITIONS.labels("run_reap").inc(len(rows))
    reaped = [Reaped(r["id"], r["attempt"], r["status"], r["lease_owner"]) for r in rows]
    for r in reaped:
        log.warning(
            "lease expired; run %s",
            "re-queued" if r.status == "pending" else f"ended {r.status}",
            extra={"run_id": r.run_id, "attempt": r.attempt, "worker": r.worker},
        )
    return reaped


@dataclass(frozen=True, slots=True)
class Pruned:
    lone_runs: int  # runs outside DAGs deleted
    dag_runs: int
    dag_steps: int  # the runs of those DAG runs

    @property
    def runs(self) -> int:
        return self.lone_runs + self.dag_steps


def prune(
    conn: Conn,
    *,
    runs_before: datetime | None,
    failed_before: datetime | None,
    limit: int = 1000,
) -> Pruned:
    """Delete up to `limit` runs outside DAGs and `limit` DAG runs whose retention has
    passed (see `run_prune`): ended well, cancelled or skipped before `runs_before`, failed
    or timed out before `failed_before`; None keeps that kind forever."""
    params = {"runs_before": runs_before, "failed_before": failed_before, "limit": limit}
    with conn.transaction():
        lone = conn.execute(query("runs", "run_prune"), params).fetchone()
        dags = conn.execute(query("runs", "dag_run_prune"), params).fetchone()
    assert lone is not None and dags is not None
    return Pruned(int(lone["runs"]), int(dags["dag_runs"]), int(dags["runs"]))


def age_priorities(
    conn: Conn,
    *,
    age_seconds: float,
    max_boost: int,
    limit: int = 10_000,
    now: datetime | None = None,
) -> int:
    """pending -> pending: raise the effective priority of runs waiting too long."""
    with conn.transaction():
        rows = conn.execute(
            query("runs", "run_age_priorities"),
            {"age_seconds": age_seconds, "max_boost": max_boost, "limit": limit, **_now(now)},
        ).fetchall()
    return len(rows)


# ---- people and the API: cancel, retry ---------------------------------------------------


def cancel(conn: Conn, run_id: int) -> str | None:
    """pending | blocked -> cancelled; running -> cancel requested (the worker stops it).

    Returns the run's status afterwards, or None when it had already finished.
    """
    with conn.transaction():
        row = conn.execute(query("runs", "run_cancel"), {"id": run_id}).fetchone()
        if row is None:
            return None
        _settle_downstream(conn, ended=_ended_in_dag([row]))
    TRANSITIONS.labels("run_cancel").inc()
    return str(row["status"])


@dataclass(frozen=True, slots=True)
class Retried:
    run_id: int
    unskipped: list[int]  # DAG steps skipped because it failed, blocked on it again


class RetryBusy(UsageError):
    """A step of the retried run's DAG kept finishing at that moment; trying again works."""


RETRY_TRIES = 5


def retry(conn: Conn, run_id: int) -> Retried | None:
    """failed | timed_out | cancelled -> pending, with a fresh retry budget; None when the
    run is not one of those. In a DAG, the steps skipped because this run did not complete
    (transitively) go back to blocked in the same transaction, so the DAG run can still
    complete: skipped -> blocked where every other upstream of theirs completed or is
    waiting again too."""
    for attempt in range(RETRY_TRIES):
        try:
            with conn.transaction():
                row = conn.execute(query("runs", "run_retry"), {"id": run_id}).fetchone()
                if row is None:
                    return None
                unskipped = _unskip_downstream(conn, run_id) if row["dag_run_id"] else []
        except psycopg.errors.LockNotAvailable:
            time.sleep(0.05 * (attempt + 1))  # a step of the DAG is finishing right now
            continue
        TRANSITIONS.labels("run_retry").inc()
        TRANSITIONS.labels("run_unskip").inc(len(unskipped))
        return Retried(run_id, unskipped)
    raise RetryBusy(f"run {run_id}'s DAG run kept changing while retrying; try again")


def _unskip_downstream(conn: Conn, run_id: int) -> list[int]:
    edges = conn.execute(query("runs", "run_lock_skipped_downstream"), {"id": run_id}).fetchall()
    upstreams: dict[int, set[int]] = defaultdict(set)
    completed, active = set(), set()
    for edge in edges:
        upstreams[edge["run_id"]].add(edge["depends_on"])
        if edge["upstream_status"] == "completed" and edge["depends_on"] != run_id:
            # `run_id` itself (retried, or completed late) releases its dependents
            # when its completion is recorded.
            completed.add(edge["depends_on"])
        elif edge["upstream_status"] in ACTIVE:
            active.add(edge["depends_on"])
    # A skipped step waits again only if none of its upstreams stays ended without
    # completing: each completed, is still under way, is the retried run, or is another
    # step waiting again. Drop the others until none is left to drop.
    waiting = set(upstreams)
    while True:
        fine = completed | active | waiting | {run_id}
        dropped = {step for step in waiting if not upstreams[step] <= fine}
        if not dropped:
            break
        waiting -= dropped
    if not waiting:
        return []
    rows = [{"id": s, "remaining": len(upstreams[s] - completed)} for s in sorted(waiting)]
    unskipped = conn.execute(query("runs", "run_unskip"), {"waiting": json_rows(rows)})
    return sorted(r["id"] for r in unskipped.fetchall())


# ---- DAGs: dependents move in the transaction of their upstream's ending --------------------

ENDED_WITHOUT_COMPLETING = frozenset({"failed", "timed_out", "cancelled", "skipped"})
MAX_DAG_NODES = 10_000


class DagError(SubmitError):
    """A DAG cannot be submitted as given (unknown node, cycle, …)."""


@dataclass(frozen=True, slots=True)
class SubmittedDag:
    id: uuid.UUID  # the DAG run
    run_ids: dict[str, int]  # node name -> run id


@dataclass(frozen=True, slots=True)
class WorkflowFire:
    """A workflow schedule's fire to turn into one DAG run (see the trigger)."""

    schedule_id: uuid.UUID
    workflow_id: uuid.UUID
    name: str
    fire_time: datetime
    run_at: datetime
    steps: Mapping[str, NewRun]
    edges: Sequence[tuple[str, str]]


def _ended_in_dag(rows: Sequence[dict[str, Any]]) -> list[int]:
    return [r["id"] for r in rows if r["in_dag"] and r["status"] in ENDED_WITHOUT_COMPLETING]


def _settle_downstream(
    conn: Conn, *, completed: Sequence[int] = (), ended: Sequence[int] = ()
) -> None:
    """blocked -> pending for dependents whose last upstream just completed; blocked ->
    skipped (upstream_failed) for every transitive dependent of runs that ended otherwise.

    Called inside the transaction that moved the upstreams, so no crash can separate an
    upstream's ending from its dependents' release: a DAG never stays stuck.
    """
    if completed:
        released = conn.execute(query("runs", "run_unblock"), {"ids": list(completed)}).fetchall()
        TRANSITIONS.labels("run_unblock").inc(sum(r["status"] == "pending" for r in released))
    if ended:
        skipped = conn.execute(
            query("runs", "run_skip_downstream"), {"ids": list(ended)}
        ).fetchall()
        TRANSITIONS.labels("run_skip").inc(len(skipped))


def submit_dag(
    conn: Conn,
    nodes: Mapping[str, NewRun],
    edges: Sequence[tuple[str, str]],
    *,
    name: str = "",
    workflow_id: uuid.UUID | None = None,
    now: datetime | None = None,
) -> SubmittedDag:
    """(new) -> pending (no upstreams) | blocked: a whole DAG in one transaction.

    `edges` are (upstream, downstream) node names. Unknown nodes, self-edges and cycles are
    refused with a DagError naming them; nothing is written then.
    """
    limits.check_text("the DAG run's name", name, limits.MAX_NAME_LENGTH)
    check_dag(nodes, edges)
    for node in nodes.values():
        node.validate()
        if node.idempotency_key is not None:
            raise DagError("runs inside a DAG cannot carry their own idempotency key")
    refuse_disabled_handlers(conn, {node.handler for node in nodes.values()})
    dag_id = uuid.uuid4()
    with conn.transaction():
        _create_dag_runs(
            conn,
            [{"id": str(dag_id), "name": name, "workflow_id": workflow_id and str(workflow_id)}],
        )
        ids = _insert_dag_steps(conn, dag_id, nodes, edges, now)
    return SubmittedDag(dag_id, ids)


def submit_workflow_fires(conn: Conn, fires: Sequence[WorkflowFire]) -> list[uuid.UUID | None]:
    """(new) -> pending | blocked: one DAG run per workflow fire, every step carrying the
    fire's schedule and fire_time; None where that fire already has its DAG run.

    Does not commit: the trigger records fires and advances schedules in the same
    transaction.
    """
    for fire in fires:
        check_dag(fire.steps, fire.edges)
    planned = {uuid.uuid4(): fire for fire in fires}
    created = set(
        _create_dag_runs(
            conn,
            [
                {
                    "id": str(dag_id),
                    "name": fire.name,
                    "workflow_id": str(fire.workflow_id),
                    "schedule_id": str(fire.schedule_id),
                    "fire_time": fire.fire_time.isoformat(),
                }
                for dag_id, fire in planned.items()
            ],
        )
    )
    for dag_id in created:
        fire = planned[dag_id]
        extra = {
            "schedule_id": str(fire.schedule_id),
            "fire_time": fire.fire_time.isoformat(),
            "run_at": fire.run_at.isoformat(),
        }
        _insert_dag_steps(conn, dag_id, fire.steps, fire.edges, None, extra)
    return [dag_id if dag_id in created else None for dag_id in planned]


def _create_dag_runs(conn: Conn, dag_runs: list[dict[str, Any]]) -> list[uuid.UUID]:
    rows = conn.execute(
        query("dags", "dag_run_create_many"), {"dag_runs": json_rows(dag_runs)}
    ).fetchall()
    return [r["id"] for r in rows]


def _insert_dag_steps(
    conn: Conn,
    dag_id: uuid.UUID,
    nodes: Mapping[str, NewRun],
    edges: Sequence[tuple[str, str]],
    now: datetime | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Insert a checked DAG's runs (blocked until their upstreams complete) and edges."""
    upstream_count = dict.fromkeys(nodes, 0)
    unique_edges = sorted(set(edges))
    for _, downstream in unique_edges:
        upstream_count[downstream] += 1
    names = list(nodes)
    rows = [
        _run_row(
            nodes[name],
            status="blocked" if upstream_count[name] else "pending",
            upstream_remaining=upstream_count[name],
            dag_run_id=str(dag_id),
            dag_node=name,
            **(extra or {}),
        )
        for name in names
    ]
    inserted = _insert_runs(conn, rows, now)
    ids = dict(zip(names, (run_id for run_id, _ in inserted), strict=True))
    if unique_edges:
        conn.execute(
            query("runs", "run_dag_edges"),
            {
                "run_ids": [ids[d] for _, d in unique_edges],
                "depends_on": [ids[u] for u, _ in unique_edges],
            },
        )
    return ids


def check_dag(nodes: Mapping[str, NewRun], edges: Sequence[tuple[str, str]]) -> None:
    if not nodes:
        raise DagError("a DAG needs at least one node")
    if len(nodes) > MAX_DAG_NODES:
        raise DagError(f"a DAG may have at most {MAX_DAG_NODES:,} nodes, got {len(nodes):,}")
    downstream: dict[str, list[str]] = {name: [] for name in nodes}
    for name in nodes:
        limits.check_name("a DAG step name", name)
    for upstream, down in edges:
        for name in (upstream, down):
            if name not in nodes:
                raise DagError(f"edge {upstream!r} -> {down!r} names an unknown node {name!r}")
        if upstream == down:
            raise DagError(f"node {upstream!r} cannot depend on itself")
        downstream[upstream].append(down)
    cycle = _find_cycle(downstream)
    if cycle:
        raise DagError("the DAG has a cycle: " + " -> ".join(cycle))


def _find_cycle(downstream: Mapping[str, list[str]]) -> list[str] | None:
    """One cycle as a path of node names (first node repeated at the end), or None.

    Iterative depth-first search, so a 10,000-node chain cannot hit the recursion limit.
    """
    ON_PATH, DONE = 1, 2
    state: dict[str, int] = {}
    for start in downstream:
        if start in state:
            continue
        path = [start]
        state[start] = ON_PATH
        stack = [iter(downstream[start])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path.pop()] = DONE
            elif state.get(nxt) == ON_PATH:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in state:
                state[nxt] = ON_PATH
                path.append(nxt)
                stack.append(iter(downstream[nxt]))
    return None


def submit_after(
    conn: Conn, run: NewRun, after: Sequence[int], *, now: datetime | None = None
) -> int:
    """(new) -> blocked | pending | skipped: one run that starts after `after` complete.

    The upstreams are locked while the run and its edges are inserted, so none can finish
    unseen in between: an upstream that already completed counts as done, one that ended
    otherwise skips the new run at once.
    """
    run.validate()
    for upstream in after:
        limits.check_run_id("a run to start after", upstream)
    if not after:
        return submit(conn, run, now=now).id
    with conn.transaction():
        upstreams = conn.execute(
            query("runs", "run_lock_upstreams"), {"ids": sorted(set(after))}
        ).fetchall()
        missing = sorted(set(after) - {u["id"] for u in upstreams})
        if missing:
            raise DagError(f"cannot run after run {missing[0]}: there is no such run")
        dag_id = next((u["dag_run_id"] for u in upstreams if u["dag_run_id"]), None)
        if dag_id is None:
            dag_id = uuid.uuid4()
            _create_dag_runs(conn, [{"id": str(dag_id), "name": f"after run {after[0]}"}])
        conn.execute(
            query("runs", "run_join_dag"),
            {"dag_run_id": dag_id, "ids": [u["id"] for u in upstreams]},
        )
        remaining = sum(u["status"] != "completed" for u in upstreams)
        failed_upstream = any(u["status"] in ENDED_WITHOUT_COMPLETING for u in upstreams)
        status = "skipped" if failed_upstream else ("blocked" if remaining else "pending")
        row = _run_row(
            run,
            status=status,
            upstream_remaining=0 if failed_upstream else remaining,
            dag_run_id=str(dag_id),
            skip_reason="upstream_failed" if failed_upstream else None,
        )
        ((run_id, _),) = _insert_runs(conn, [row], now)
        conn.execute(
            query("runs", "run_dag_edges"),
            {"run_ids": [run_id] * len(upstreams), "depends_on": [u["id"] for u in upstreams]},
        )
    return run_id


def cancel_dag(conn: Conn, dag_run_id: uuid.UUID) -> dict[str, int]:
    """Cancel every unfinished run of a DAG run; counts of `cancelled` and `requested`."""
    with conn.transaction():
        rows = conn.execute(query("runs", "run_cancel_dag"), {"dag_run_id": dag_run_id}).fetchall()
        cancelled = [r["id"] for r in rows if r["status"] == "cancelled"]
        _settle_downstream(conn, ended=cancelled)
    TRANSITIONS.labels("run_cancel").inc(len(rows))
    return {"cancelled": len(cancelled), "requested": len(rows) - len(cancelled)}


def _lost(transition: str, run_id: int, attempt: int, worker: str) -> None:
    """An actor lost its fence: say so in the log and count it; the caller discards."""
    FENCE_LOST.labels(transition).inc()
    log.warning(
        "%s changed 0 rows: attempt %d no longer holds the run; result discarded",
        transition,
        attempt,
        extra={"run_id": run_id, "attempt": attempt, "worker": worker},
    )
