"""Submitting runs: (new) -> pending, one run or many, with idempotency keys.

A submit checks each run (`NewRun.validate`), refuses disabled handlers, and sends the rows
through `app.runs.run_inserts` in as few statements as it can: outside a transaction one
INSERT that commits on its own, otherwise in one transaction that a key clash undoes.
A DAG's runs are submitted by `app.dags.dag_submission`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from app.core.db import Conn, outside_transaction
from app.core.sql import query
from app.handlers.gate import refuse_disabled_handlers
from app.runs.run_inserts import (
    COPY_THRESHOLD,
    SUBMIT_CHUNK,
    FireRequest,
    IdempotencyConflict,
    NewRun,
    copy_runs,
    insert_fire_rows,
    insert_fires,
    insert_one,
    insert_runs,
)


@dataclass(frozen=True, slots=True)
class Submitted:
    id: int
    created: bool  # False: the idempotency key named an existing run with this payload


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
    if _one_statement_suffices(conn, unkeyed, keyed):
        # No BEGIN/COMMIT: the INSERT commits (and notifies) on its own, in one round trip.
        if len(runs) == 1:
            inserted = insert_one(conn, runs[0], now)
        else:
            inserted = insert_runs(conn, [r.as_row() for r in unkeyed + keyed], now)
        return _submitted(runs, inserted, _existing_runs_for(conn, by_key, inserted))
    with conn.transaction():
        rows: list[tuple[int, str | None]]
        if len(unkeyed) >= COPY_THRESHOLD:
            rows = [(run_id, None) for run_id in copy_runs(conn, unkeyed, now)]
            rows += insert_runs(conn, [r.as_row() for r in keyed], now) if keyed else []
        else:
            rows = insert_runs(conn, [r.as_row() for r in unkeyed + keyed], now)
        existing = _existing_runs_for(conn, by_key, rows)
    return _submitted(runs, rows, existing)


def _one_statement_suffices(conn: Conn, unkeyed: list[NewRun], keyed: list[NewRun]) -> bool:
    """True when the submit is a single INSERT that needs no transaction around it:
    outside any transaction, one JSON chunk, and at most one key (a clash found after the
    INSERT then leaves nothing written; with more runs, one clash must undo the others)."""
    total = len(unkeyed) + len(keyed)
    return (
        outside_transaction(conn)
        and len(unkeyed) < COPY_THRESHOLD
        and total <= SUBMIT_CHUNK
        and (not keyed or total == 1)
    )


def _submitted(
    runs: Sequence[NewRun], rows: list[tuple[int, str | None]], existing: dict[str, int]
) -> list[Submitted]:
    created_by_key = {key: run_id for run_id, key in rows if key is not None}
    # Ids come from one sequence in insertion order, so unkeyed runs map in order.
    unkeyed_ids = iter(run_id for run_id, key in rows if key is None)
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


def _existing_runs_for(
    conn: Conn, by_key: dict[str, NewRun], inserted: list[tuple[int, str | None]]
) -> dict[str, int]:
    """Ids of runs that already held keys in this batch; refuses a different payload."""
    created = {key for _, key in inserted if key is not None}
    clashing = [key for key in by_key if key not in created]
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
    return insert_fires(conn, fires)


def submit_fire_rows(conn: Conn, fires_json: str, shared_json: str | None) -> Callable[[], int]:
    """(new) -> pending, one run per fire of a trigger batch's fire rows that asks for one,
    and one per schedule of each of its shared fires; call the result (after the pipeline
    it was queued in) for how many were created."""
    return insert_fire_rows(conn, fires_json, shared_json)
