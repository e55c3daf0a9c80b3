"""The run state machine: the only code that changes a run's status.

One function per transition, named like its SQL statement in `app/core/sql/runs.sql`; each is
one conditional statement. When a fenced transition changes fewer rows than asked, the
actor lost a race (its lease expired, the run was cancelled or reaped): the loser is
logged and counted here, and the caller discards its result.

Functions take a psycopg connection and do not commit, except where noted: callers own
their transactions (the trigger inserts fires and advances schedules in one).

Beside it: `app.runs.submission` and `app.dags.dag_submission` insert new runs (their
first status, not a transition of an existing run), `app.runs.retention` deletes old history.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from app.core import limits
from app.core.backoff import full_jitter
from app.core.db import Conn, outside_transaction
from app.core.errors import UsageError
from app.core.json_rows import encode_json, json_rows
from app.core.limits import DEFAULT_QUEUE
from app.core.sql import query
from app.handlers.gate import COMMAND_HANDLERS, refuse_commands_for_run
from app.handlers.jobs import JSON, ClaimedRun, Outcome, OutcomeStatus
from app.runs import dependency_calls, fair_turns, key_rates, limit_fit, queue_limits
from app.runs.counters import FENCE_LOST, TRANSITIONS
from app.runs.fingerprints import (
    CRASHED,
    LEASE_EXPIRED,
    QUARANTINED,
    SNOOZED_TOO_OFTEN,
    fingerprint_of,
)
from app.runs.states import ACTIVE, RunStatus

log = logging.getLogger(__name__)


_decode_json = json.JSONDecoder().decode

RETRY_BASE_DELAY_SECONDS = 1.0
RETRY_MAX_DELAY_SECONDS = 600.0
NOTIFY_CHANNEL = "sundial_runs"
# How a run's attempt ended that tells about the dependencies it calls (a cancel does not).
CALL_OUTCOMES = {OutcomeStatus.COMPLETED, OutcomeStatus.FAILED, OutcomeStatus.TIMED_OUT}
# A limited queue's claim reads this many due runs per run it may start, and
# LIMITED_SCAN_MIN more, past the keys at their limit: enough for the few runs a key's
# limit passes over (reading twice as many cost a drain 5 %).
LIMITED_SCAN_FACTOR = 1.25
LIMITED_SCAN_MIN = 50


@dataclass(frozen=True, slots=True)
class Finish:
    """How one attempt ended, as the worker reports it."""

    run_id: int
    attempt: int
    outcome: Outcome
    suspect: bool = False  # it crashed before, so it ran in a process of its own

    @property
    def crashed_alone(self) -> bool:
        """A suspect whose own process died: evidence against it (see run_crash_many)."""
        return self.suspect and self.outcome.crashed


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """Attempts as (run id, attempt): a report about one attempt never touches another."""

    renewed: set[tuple[int, int]]
    cancel_requested: set[tuple[int, int]]
    lost: set[tuple[int, int]]  # no longer leased to this worker: stop the job, drop its result


def _now(now: datetime | None) -> dict[str, datetime | None]:
    return {"now": now}


# ---- worker: claim, heartbeat, finish, release -------------------------------------------


def claim(
    conn: Conn,
    worker: str,
    limit: int,
    lease_seconds: float,
    *,
    busy: bool = False,
    queue: str = DEFAULT_QUEUE,
    now: datetime | None = None,
) -> list[ClaimedRun]:
    """pending -> running for up to `limit` due runs of `queue`, leased to `worker` (none
    while the queue is paused; within its concurrency limits, if it has any). A suspect (a
    run that crashed before) is claimed only alone, by a worker that is not `busy` with
    others."""
    if limit <= 0:
        return []
    params = {
        "worker": worker,
        "limit": limit,
        "lease_seconds": lease_seconds,
        "busy": busy,
        "queue": queue,
        **_now(now),
    }
    if queue_limits.limited(conn, queue):
        rows = _claim_limited(conn, params)
    else:
        # Plain tuples and JSON decoded here: a drain claims thousands of runs a second.
        with conn.cursor(row_factory=tuple_row) as cursor:
            rows = cursor.execute(query("runs", "run_claim"), params).fetchall()
    TRANSITIONS.labels("run_claim").inc(len(rows))
    rows.sort(key=_claim_order)  # start in claim order
    return [
        ClaimedRun(
            run_id,
            attempt,
            handler,
            {} if args == "{}" else _decode_json(args),
            execution_model,
            float(timeout_seconds),
            idempotency_key,
            fire_time,
            None if upstream is None else _decode_json(upstream),
            crash_count,
        )
        for (
            run_id,
            attempt,
            handler,
            args,
            execution_model,
            timeout_seconds,
            idempotency_key,
            fire_time,
            _priority,
            _run_at,
            crash_count,
            upstream,
        ) in rows
    ]


@dataclass(slots=True)
class DownstreamClaim:
    """Asks `finish_many` to claim for the finishing worker, in the finish's transaction,
    up to `limit` DAG steps that its completions release, so the next step of a chain
    starts without a notification and another claim. `jobs` gets them once committed."""

    limit: int
    lease_seconds: float
    queue: str = DEFAULT_QUEUE  # the finishing worker's: steps of other queues wait for theirs
    jobs: list[ClaimedRun] = field(default_factory=list)


def _complete(
    conn: Conn,
    worker: str,
    completed: Sequence[Finish],
    claim: DownstreamClaim | None,
    now: datetime | None,
    *,
    completed_before: Sequence[int] = (),
) -> tuple[set[tuple[int, int]], list[dict[str, Any]]]:
    """running -> completed for `completed` (one attempt per run), and blocked -> pending
    for the dependents whose last upstream that was (or one of `completed_before`), or ->
    running for up to `claim.limit` of them that are due, leased to `worker`: one
    statement. Returns the attempts recorded and the steps started, which are the
    worker's only once the caller's transaction (if any) commits."""
    with conn.cursor(row_factory=dict_row) as cursor:
        rows = cursor.execute(
            query("runs", "run_complete_many"),
            {
                "worker": worker,
                # Ids as array literals and results as one JSON object: building them costs
                # a fraction of adapting three Python lists element by element.
                "ids": _int_array([f.run_id for f in completed]),
                "attempts": _attempts_json((f.run_id, f.attempt) for f in completed),
                "results": _results_json(completed),
                "completed_before": _int_array(list(completed_before)),
                # A release alone starts nothing: no worker to lease the steps to.
                "claim_limit": claim.limit if claim else 0,
                "queue": claim.queue if claim else DEFAULT_QUEUE,
                "lease_seconds": claim.lease_seconds if claim else None,
                **_now(now),
            },
        ).fetchall()
    recorded = {(r["id"], r["attempt"]) for r in rows if r["status"] == RunStatus.COMPLETED}
    started = [r for r in rows if r["status"] == RunStatus.RUNNING]
    TRANSITIONS.labels("run_complete").inc(len(recorded))
    TRANSITIONS.labels("run_unblock").inc(sum(r["status"] == RunStatus.PENDING for r in rows))
    TRANSITIONS.labels("run_claim").inc(len(started))
    return recorded, started


def _started_jobs(conn: Conn, started: list[dict[str, Any]]) -> list[ClaimedRun]:
    """The steps `_complete` started, in claim order, as jobs for the worker."""
    started.sort(key=lambda r: (-r["priority"], r["run_at"]))
    unseen = [r for r in started if r["upstream_results"] is None]
    if unseen:  # an upstream's finish committed while the statement waited: read them now
        ids = [r["id"] for r in unseen]
        fresh = conn.execute(query("run_reads", "run_upstream_results"), {"ids": ids}).fetchall()
        results = {row["id"]: row["upstream_results"] for row in fresh}
        for r in unseen:
            r["upstream_results"] = results[r["id"]]
    return [
        ClaimedRun(
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
        for r in started
    ]


def _claim_limited(conn: Conn, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """`claim` in a queue with limits: in the queue's claim turn, so each claim counts the
    runs the one before it started and spends what is left of the rate bucket (nothing
    while the queue is paused). Limits of concurrency alone are counted, chosen and claimed
    in one statement (a limited drain claims hundreds of runs a few milliseconds apart);
    a rate per key or fair share by `_claim_chosen`."""
    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cursor:
        cursor.execute(query("queues", "queue_claim_turn"), {"queue": params["queue"]})
        setting = conn.execute(
            query("queues", "queue_setting"), {"name": params["queue"], "now": params["now"]}
        ).fetchone() or {"paused": False, "max_running": None, "key_field": None,
                         "key_max_running": None}  # fmt: skip
        if setting["paused"]:
            return []
        per_key_rate = bool(setting.get("rate_per_key"))
        tokens = None if per_key_rate else setting.get("rate_tokens_now")
        if tokens is not None:  # a rate limit: no more starts than its bucket holds now
            params = {**params, "limit": min(params["limit"], math.floor(tokens))}
            per_second = setting["rate_limit"] / setting["rate_period_seconds"]
            queue_limits.rate_bucket_left(params["queue"], tokens, per_second)
            if params["limit"] <= 0:
                return []
        scan = math.ceil(params["limit"] * LIMITED_SCAN_FACTOR) + LIMITED_SCAN_MIN
        limits = {key: setting[key] for key in ("key_field", "max_running", "key_max_running")}
        read = {**params, **limits, "scan": scan}
        if not per_key_rate and not setting.get("fair_share"):  # limits of concurrency alone
            claimed = cursor.execute(
                query("runs", "run_claim_limited"), {**read, "ids": None}
            ).fetchall()
        else:
            claimed = _claim_chosen(conn, cursor, read, setting)
        if tokens is not None:
            spent = {"name": params["queue"], "tokens": tokens - len(claimed),
                     "clock": setting["clock"]}  # fmt: skip
            cursor.execute(query("queues", "queue_spend_tokens"), spent)
            queue_limits.rate_bucket_left(params["queue"], spent["tokens"], per_second)
        return claimed


def _claim_chosen(
    conn: Conn, cursor: psycopg.Cursor[Any], read: dict[str, Any], setting: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """The limited claim of a queue with a rate per key or fair share, in its claim turn:
    reads the runs running by key and the due ones, lets `limit_fit` choose (with each
    key's rate bucket, or key by key in turns), and claims those."""
    max_running, key_max_running = read["max_running"], read["key_max_running"]
    running: dict[str | None, int] = dict(
        cursor.execute(query("runs", "run_limited_running"), read).fetchall()
    )
    full = limit_fit.full_keys(running, key_max_running)
    key_rate = key_rates.KeyRates(conn, setting) if setting.get("rate_per_key") else None
    if key_rate is not None:
        full += key_rate.starved()
    read = {**read, "full": json.dumps(full)}

    def choose(due: list[limit_fit.Due]) -> list[int]:
        key_starts = key_rate.starts_for(due) if key_rate is not None else None
        return limit_fit.fit(due, running, limit=read["limit"], max_running=max_running,
                             key_max_running=key_max_running, key_starts=key_starts,
                             busy=read["busy"])  # fmt: skip

    turns = fair_turns.FairTurns(conn, read, setting) if setting.get("fair_share") else None
    if turns is None:
        candidates = cursor.execute(query("runs", "run_limited_candidates"), read)
        due = list(map(limit_fit.Due._make, candidates))
        ids = choose(due)
    else:  # key by key in turns
        due = turns.due()
        ids = choose(due)
        room = limit_fit.limit_room(running, limit=read["limit"], max_running=max_running)
        if turns.kept and len(ids) < room:  # the kept turns fall short: read them afresh
            due = turns.read()
            ids = choose(due)
    if not ids:
        if turns is not None and not turns.kept:
            turns.keep(due, set())
        return []
    claimed = cursor.execute(
        query("runs", "run_claim_limited"), {**read, "ids": _int_array(ids)}
    ).fetchall()
    if turns is not None:  # off the turns: the runs claimed, and those no longer due
        turns.keep(due, set(ids))
    if key_rate is not None:
        key_rate.spend(due, {row[0] for row in claimed})
    return claimed


def _claim_order(row: tuple[Any, ...]) -> tuple[int, datetime]:
    return -row[8], row[9]  # priority, highest first; then run_at


def heartbeat(
    conn: Conn,
    worker: str,
    held: Sequence[tuple[int, int]],
    lease_seconds: float,
    *,
    now: datetime | None = None,
) -> HeartbeatResult:
    """running -> running: renew every (run id, attempt) lease `worker` holds."""
    if not held:
        return HeartbeatResult(set(), set(), set())
    params = {
        "worker": worker,
        "ids": [h[0] for h in held],
        "attempts": _attempts_json(held),  # one attempt per run: the worker's in-flight map
        "lease_seconds": lease_seconds,
        **_now(now),
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
            {**params, "ids": [m[0] for m in missing], "attempts": _attempts_json(missing)},
        ).fetchall()
        cancel |= {(r["id"], r["attempt"]) for r in still_held if r["cancel_requested"]}
        lost = set(missing) - {(r["id"], r["attempt"]) for r in still_held}
    return HeartbeatResult(renewed, cancel, lost)


def count_lease_lost() -> None:
    """The worker found (by heartbeat) that a running attempt no longer holds its run."""
    FENCE_LOST.labels("run_heartbeat").inc()


def finish_many(
    conn: Conn,
    worker: str,
    finishes: Sequence[Finish],
    *,
    now: datetime | None = None,
    claim_downstream: DownstreamClaim | None = None,
) -> list[Finish]:
    """Record how attempts ended: running -> completed, or -> pending (retry, or a snooze)
    / failed / timed_out / cancelled. Returns the finishes that won; the rest lost their
    fence.

    Completions, failures and snoozes go in (at most) three statements, in one transaction
    (none for completions alone); with `claim_downstream`, the DAG steps the completions
    release are claimed by the completions' statement too.
    """
    completed = [f for f in finishes if f.outcome.status is OutcomeStatus.COMPLETED]
    snoozed = [f for f in finishes if f.outcome.status is OutcomeStatus.SNOOZED]
    crashed = [f for f in finishes if f.crashed_alone]
    ended = [f for f in finishes if f.outcome.status not in _NOT_ENDED]
    failed = [f for f in ended if not f.crashed_alone]
    won: set[tuple[int, int]] = set()
    started: list[dict[str, Any]] = []
    groups = _one_attempt_per_run(completed)
    # Completions alone are one statement, which needs no BEGIN/COMMIT around it.
    alone = (
        not failed and not crashed and not snoozed and len(groups) <= 1
        and outside_transaction(conn)
    )  # fmt: skip
    with nullcontext() if alone else conn.transaction():
        for n, group in enumerate(groups):
            # Only the first group claims what it frees (the others are a rare repeat).
            recorded, freed = _complete(
                conn, worker, group, claim_downstream if n == 0 else None, now
            )
            won |= recorded
            started += freed
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
                    "fingerprints": [
                        fingerprint_of(f.outcome.error, f.outcome.traceback).key for f in failed
                    ],
                    **_now(now),
                },
            ).fetchall()
            won |= {(r["id"], r["attempt"]) for r in rows}
            TRANSITIONS.labels("run_fail").inc(len(rows))
            _settle_downstream(conn, ended=_ended_in_dag(rows), now=now)
        if crashed:
            won |= _record_crashes(conn, worker, crashed, now)
        if snoozed:
            won |= _record_snoozes(conn, worker, snoozed, now)
    if claim_downstream is not None and started:  # committed: leased to `worker`
        claimed = _started_jobs(conn, started)
        claim_downstream.jobs += claimed
        claim_downstream.limit -= len(claimed)
    late = [f for f in completed if (f.run_id, f.attempt) not in won]
    won |= {(f.run_id, f.attempt) for f in complete_late(conn, worker, late, now=now)}
    winners = [f for f in finishes if (f.run_id, f.attempt) in won]
    for f in finishes:
        if (f.run_id, f.attempt) not in won:
            _lost("run_finish", f.run_id, f.attempt, worker)
    # what the dependencies' breakers count: completions, and failures and timeouts
    calls = ((f.run_id, f.outcome.status is OutcomeStatus.COMPLETED)
             for f in winners if f.outcome.status in CALL_OUTCOMES)  # fmt: skip
    dependency_calls.record_calls(conn, calls, now)
    return winners


_NOT_ENDED = frozenset({OutcomeStatus.COMPLETED, OutcomeStatus.SNOOZED})


def _record_snoozes(
    conn: Conn, worker: str, snoozed: Sequence[Finish], now: datetime | None
) -> set[tuple[int, int]]:
    """running -> pending, due again after each one's delay, without spending an attempt
    (or failed past the snoozes allowed, or cancelled if that was requested meanwhile)."""
    rows = conn.execute(
        query("runs", "run_snooze_many"),
        {
            "worker": worker,
            "ids": [f.run_id for f in snoozed],
            "attempts": [f.attempt for f in snoozed],
            "delays": [f.outcome.snooze_seconds for f in snoozed],
            "reasons": [f.outcome.snooze_reason for f in snoozed],
            "max_snoozes": limits.MAX_SNOOZES,
            "fingerprint": SNOOZED_TOO_OFTEN,
            **_now(now),
        },
    ).fetchall()
    TRANSITIONS.labels("run_snooze").inc(len(rows))
    _settle_downstream(conn, ended=_ended_in_dag(rows), now=now)
    return {(r["id"], r["attempt"]) for r in rows}


def report_progress(
    conn: Conn,
    worker: str,
    reports: Mapping[tuple[int, int], tuple[float, str | None]],
    *,
    now: datetime | None = None,
) -> set[tuple[int, int]]:
    """running -> running: store the latest progress of each (run id, attempt) in one
    statement; returns the attempts written (the others no longer hold their run)."""
    latest: dict[int, tuple[int, float, str | None]] = {}
    for (run_id, attempt), (value, message) in reports.items():
        if run_id not in latest or latest[run_id][0] < attempt:  # the newest attempt speaks
            latest[run_id] = (attempt, value, message)
    if not latest:
        return set()
    doc = {str(i): {"attempt": a, "value": v, "message": m} for i, (a, v, m) in latest.items()}
    rows = conn.execute(
        query("runs", "run_progress_many"),
        {"worker": worker, "ids": list(latest), "reports": encode_json(doc), **_now(now)},
    ).fetchall()
    return {(r["id"], r["attempt"]) for r in rows}


def _record_crashes(
    conn: Conn, worker: str, crashed: Sequence[Finish], now: datetime | None
) -> set[tuple[int, int]]:
    """Suspects whose own process died: re-queued, or quarantined at their job's limit."""
    rows = conn.execute(
        query("runs", "run_crash_many"),
        {
            "worker": worker,
            "ids": [f.run_id for f in crashed],
            "attempts": [f.attempt for f in crashed],
            "errors": [f.outcome.error or "its process died" for f in crashed],
            "max_crashes": limits.DEFAULT_MAX_CRASHES,
            "crash_fingerprint": CRASHED,
            "quarantine_fingerprint": QUARANTINED,
            **_now(now),
        },
    ).fetchall()
    TRANSITIONS.labels("run_crash").inc(len(rows))
    _settle_downstream(conn, ended=_ended_in_dag(rows), now=now)
    for row in rows:
        _log_ending(row, worker, "quarantined" if row["quarantined"] else "crashed")
    return {(r["id"], r["attempt"]) for r in rows}


def _log_ending(row: dict[str, Any], worker: str | None, outcome: str) -> None:
    """One line per crashed, quarantined or handed-back run that an operator can search
    for (JSON by default)."""
    log.warning(
        "run %s %s",
        row["id"],
        row["last_error"],
        extra={
            "run_id": row["id"],
            "attempt": row["attempt"],
            "worker": worker,
            "handler": row["handler"],
            "outcome": outcome,
            "error": row["last_error"],
        },
    )


def complete_late(
    conn: Conn, worker: str, finishes: Sequence[Finish], *, now: datetime | None = None
) -> list[Finish]:
    """pending | failed -> completed for completions that lost their fence only because
    the reaper declared the attempt dead meanwhile (its lease expired, e.g. while the
    database was unreachable) and no newer attempt exists. Returns those accepted.

    In a DAG, the steps the reaper's verdict skipped wait again and are released in the
    same transaction, as if the completion had come in time. One transaction per run: a
    DAG step changing at that very moment leaves that completion refused, as before.
    """
    accepted = []
    for f in finishes:
        params = {"id": f.run_id, "attempt": f.attempt, "worker": worker, **_now(now)}
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
                    _settle_downstream(conn, completed=[f.run_id], now=now)
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


def _results_json(finishes: Sequence[Finish]) -> str:
    """The results of `finishes` as one JSON object keyed by run id, as `run_complete_many`
    reads them; a run without a result has no key."""
    return encode_json(
        {str(f.run_id): f.outcome.result for f in finishes if f.outcome.result is not None}
    )


def _attempts_json(attempts: Iterable[tuple[int, int]]) -> str:
    """(run id, attempt) pairs as one JSON object keyed by run id: `{"12":1,"13":2}`."""
    return "{" + ",".join(f'"{run_id}":{attempt}' for run_id, attempt in attempts) + "}"


def _one_attempt_per_run(finishes: Sequence[Finish]) -> list[list[Finish]]:
    """`finishes` in groups holding each run once, in order: a worker that lost a lease
    and claimed the run again may report two attempts of it in one batch (each is
    recorded, or loses its fence, on its own)."""
    groups: list[dict[int, Finish]] = []  # run id -> its finish, in order
    for f in finishes:
        group = next((g for g in groups if f.run_id not in g), None)
        if group is None:
            group = {}
            groups.append(group)
        group[f.run_id] = f
    return [list(group.values()) for group in groups]


def _int_array(values: list[int]) -> str:
    """A PostgreSQL array literal of whole numbers: `{1,2,3}`."""
    return "{" + ",".join(map(str, values)) + "}"


def release_many(
    conn: Conn, worker: str, held: Sequence[tuple[int, int]], *, now: datetime | None = None
) -> list[int]:
    """running -> pending: hand unfinished attempts back at shutdown (not a used attempt)."""
    if not held:
        return []
    with conn.transaction():
        rows = conn.execute(
            query("runs", "run_release_many"),
            {
                "worker": worker,
                "ids": [h[0] for h in held],
                "attempts": [h[1] for h in held],
                **_now(now),
            },
        ).fetchall()
        _settle_downstream(conn, ended=_ended_in_dag(rows), now=now)
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
    crashed: bool = True  # its handler had begun: the worker died under it
    quarantined: bool = False
    crash_count: int = 0


def expire(conn: Conn, *, limit: int = 1000, now: datetime | None = None) -> list[int]:
    """pending -> skipped for runs not started by their deadline (up to `limit`): their
    ids. A DAG step's dependents are skipped with it."""
    with conn.transaction():
        rows = conn.execute(query("runs", "run_expire"), {"limit": limit, **_now(now)}).fetchall()
        _settle_downstream(conn, ended=_ended_in_dag(rows), now=now)
    TRANSITIONS.labels("run_expire").inc(len(rows))
    return [r["id"] for r in rows]


def reap(conn: Conn, *, limit: int = 1000, now: datetime | None = None) -> list[Reaped]:
    """running -> pending | failed | cancelled for runs whose lease has expired: handed
    back when the attempt never began, else a crash, quarantined at the job's limit."""
    with conn.transaction():
        params = {
            "limit": limit,
            "lease_fingerprint": LEASE_EXPIRED,
            "quarantine_fingerprint": QUARANTINED,
            "max_crashes": limits.DEFAULT_MAX_CRASHES,
            "deaths_per_crash": limits.WORKER_DEATHS_PER_CRASH,
            **_now(now),
        }
        rows = conn.execute(query("runs", "run_reap"), params).fetchall()
        _settle_downstream(conn, ended=_ended_in_dag(rows), now=now)
    TRANSITIONS.labels("run_reap").inc(len(rows))
    for row in rows:
        outcome = (
            "quarantined" if row["quarantined"] else "crashed" if row["crashed"] else "handed back"
        )
        _log_ending(row, row["lease_owner"], outcome)
    return [
        Reaped(
            r["id"],
            r["attempt"],
            r["status"],
            r["lease_owner"],
            r["crashed"],
            r["quarantined"],
            r["crash_count"],
        )
        for r in rows
    ]


def mark_begun(conn: Conn, worker: str, attempts: Sequence[tuple[int, int]]) -> None:
    """Record that these attempts' handlers began (process runs: once a child took them),
    so that if their worker dies now they count as crashes rather than hand-backs."""
    if attempts:
        conn.execute(
            query("runs", "run_mark_begun"),
            {
                "worker": worker,
                "ids": [run_id for run_id, _ in attempts],
                "attempts": Jsonb({str(run_id): attempt for run_id, attempt in attempts}),
            },
        )


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


def cancel(conn: Conn, run_id: int, *, now: datetime | None = None) -> str | None:
    """pending | blocked -> cancelled; running -> cancel requested (the worker stops it).

    Returns the run's status afterwards, or None when it had already finished.
    """
    with conn.transaction():
        row = conn.execute(query("runs", "run_cancel"), {"id": run_id, **_now(now)}).fetchone()
        if row is None:
            return None
        _settle_downstream(conn, ended=_ended_in_dag([row]), now=now)
    TRANSITIONS.labels("run_cancel").inc()
    return str(row["status"])


@dataclass(frozen=True, slots=True)
class Retried:
    run_id: int
    unskipped: list[int]  # DAG steps skipped because it failed, blocked on it again


class RetryBusy(UsageError):
    """A step of the retried run's DAG kept finishing at that moment; trying again works."""


RETRY_TRIES = 5


def retry(
    conn: Conn, run_id: int, *, args: Mapping[str, Any] | None = None, now: datetime | None = None
) -> Retried | None:
    """failed | timed_out | cancelled -> pending, with a fresh retry budget (and `args`
    instead of its own when given); None when the run is not one of those. In a DAG, the
    steps skipped because this run did not complete (transitively) go back to blocked in
    the same transaction, so the DAG run can still complete: skipped -> blocked where
    every other upstream of theirs completed or is waiting again too."""
    refuse_commands_for_run(conn, run_id)
    for attempt in range(RETRY_TRIES):
        try:
            with conn.transaction():
                new_args = None if args is None else Jsonb(dict(args))
                params = {"id": run_id, "args": new_args, **_now(now)}
                row = conn.execute(query("runs", "run_retry"), params).fetchone()
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


# ---- many at once: a person's bulk action (app.runs.bulk_actions) -----------------------


def cancel_many(conn: Conn, ids: Sequence[int], *, now: datetime | None = None) -> list[int]:
    """`cancel` for a batch of runs in one statement: pending | blocked -> cancelled,
    running -> cancel requested. Returns the ids it changed; the others had ended."""
    if not ids:
        return []
    with conn.transaction():
        params = {"ids": _int_array(list(ids)), **_now(now)}
        rows = conn.execute(query("runs", "run_cancel_many"), params).fetchall()
        _settle_downstream(conn, ended=_ended_in_dag(rows), now=now)
    TRANSITIONS.labels("run_cancel").inc(len(rows))
    return [r["id"] for r in rows]


def retry_many(
    conn: Conn,
    ids: Sequence[int],
    *,
    may_run_commands: bool = True,
    now: datetime | None = None,
) -> list[Retried]:
    """`retry` for a batch of runs in one statement: failed | timed_out | cancelled ->
    pending with a fresh retry budget, and in a DAG the steps skipped because of them wait
    again, in the same transaction. Runs in other states, and runs of handlers that run
    commands unless `may_run_commands`, are left alone. Returns those retried."""
    if not ids:
        return []

    params = {
        "ids": _int_array(list(ids)),
        "may_run_commands": may_run_commands,
        "command_handlers": sorted(COMMAND_HANDLERS),
        **_now(now),
    }
    for attempt in range(RETRY_TRIES):
        try:
            with conn.transaction():
                rows = conn.execute(query("runs", "run_retry_many"), params).fetchall()
                retried = [
                    Retried(r["id"], _unskip_downstream(conn, r["id"]) if r["dag_run_id"] else [])
                    for r in rows
                ]
        except psycopg.errors.LockNotAvailable:
            time.sleep(0.05 * (attempt + 1))  # a step of a DAG is finishing right now
            continue
        TRANSITIONS.labels("run_retry").inc(len(retried))
        TRANSITIONS.labels("run_unskip").inc(sum(len(r.unskipped) for r in retried))
        return retried
    raise RetryBusy("a DAG run among these runs kept changing while retrying; try again")


def _unskip_downstream(conn: Conn, run_id: int) -> list[int]:
    edges = conn.execute(query("runs", "run_lock_skipped_downstream"), {"id": run_id}).fetchall()
    upstreams: dict[int, set[int]] = defaultdict(set)
    completed, active = set(), set()
    for edge in edges:
        upstreams[edge["run_id"]].add(edge["depends_on"])
        if edge["upstream_status"] == RunStatus.COMPLETED and edge["depends_on"] != run_id:
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

ENDED_WITHOUT_COMPLETING = frozenset(
    {RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.CANCELLED, RunStatus.SKIPPED}
)


def _ended_in_dag(rows: Sequence[dict[str, Any]]) -> list[int]:
    return [r["id"] for r in rows if r["in_dag"] and r["status"] in ENDED_WITHOUT_COMPLETING]


def _settle_downstream(
    conn: Conn,
    *,
    completed: Sequence[int] = (),
    ended: Sequence[int] = (),
    now: datetime | None = None,
) -> None:
    """blocked -> pending for dependents whose last upstream just completed; blocked ->
    skipped (upstream_failed) for every transitive dependent of runs that ended otherwise.

    Called inside the transaction that moved the upstreams, so no crash can separate an
    upstream's ending from its dependents' release: a DAG never stays stuck.
    """
    if completed:  # a release alone: no completion to record, no step started
        _complete(conn, "", [], None, now, completed_before=completed)
    while ended:
        # Again from the steps just skipped, until none is: a run_skip_downstream that
        # waited for a step's row lock does not see what the holder committed meanwhile
        # (a run submitted after that step, a step a retry made wait again).
        skipped = conn.execute(
            query("runs", "run_skip_downstream"), {"ids": list(ended), **_now(now)}
        ).fetchall()
        TRANSITIONS.labels("run_skip").inc(len(skipped))
        ended = [r["id"] for r in skipped]


def cancel_dag(conn: Conn, dag_run_id: uuid.UUID, *, now: datetime | None = None) -> dict[str, int]:
    """Cancel every unfinished run of a DAG run; counts of `cancelled` and `requested`."""
    with conn.transaction():
        params = {"dag_run_id": dag_run_id, **_now(now)}
        rows = conn.execute(query("runs", "run_cancel_dag"), params).fetchall()
        cancelled = [r["id"] for r in rows if r["status"] == RunStatus.CANCELLED]
        _settle_downstream(conn, ended=cancelled, now=now)
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
