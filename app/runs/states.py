"""The states of a run, and which transitions move a run between them.

Only `app.runs.transitions` writes a run's status; each of its transition functions is one
conditional UPDATE whose WHERE clause lists the `from` states below.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    PENDING = "pending"
    """Due at `run_at`. Left by a worker's claim, or by cancel. A retry waiting for its
    backoff is pending with a later `run_at` (shown as "retrying"); so is a run its handler
    snoozed (`snoozed_until`, shown as "snoozed until")."""

    BLOCKED = "blocked"
    """Waits for DAG upstreams. Left when the last upstream completes (-> pending) or one
    fails (-> skipped), in the same transaction as that upstream's finish."""

    RUNNING = "running"
    """Leased by a worker until `lease_until`. Left by the worker's finish, fail, time-out,
    snooze or release, or by the reaper once the lease has expired."""

    COMPLETED = "completed"
    """Terminal: the handler returned."""

    FAILED = "failed"
    """Terminal: attempts exhausted or a non-retryable error, or quarantined (the process
    of its own it ran in as a suspect died its job's max_crashes times; `quarantined` is
    set). The dead letters. A crash otherwise spends no attempt: see run_reap."""

    TIMED_OUT = "timed_out"
    """Terminal: the last allowed attempt ran past its timeout."""

    CANCELLED = "cancelled"
    """Terminal: a person or the API cancelled it."""

    SKIPPED = "skipped"
    """Terminal: a policy decided not to run it (overlap, upstream failure, its deadline
    passed before it started)."""


TERMINAL = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.TIMED_OUT,
        RunStatus.CANCELLED,
        RunStatus.SKIPPED,
    }
)
ACTIVE = frozenset({RunStatus.PENDING, RunStatus.BLOCKED, RunStatus.RUNNING})

# transition name -> (from states, to states). `app.runs.transitions` implements each one;
# tests/unit/test_state_machine.py checks this table against the states each statement of
# app/core/sql/runs.sql reads and writes, the enum and the database CHECK constraint.
TRANSITIONS: dict[str, tuple[frozenset[RunStatus], frozenset[RunStatus]]] = {
    # skipped: a DAG step submitted after one of its upstreams already failed
    "run_submit": (
        frozenset(),
        frozenset({RunStatus.PENDING, RunStatus.BLOCKED, RunStatus.SKIPPED}),
    ),
    "run_claim": (frozenset({RunStatus.PENDING}), frozenset({RunStatus.RUNNING})),
    "run_heartbeat": (frozenset({RunStatus.RUNNING}), frozenset({RunStatus.RUNNING})),
    # a handler's progress report, written while its attempt holds the run
    "run_progress": (frozenset({RunStatus.RUNNING}), frozenset({RunStatus.RUNNING})),
    "run_complete": (frozenset({RunStatus.RUNNING}), frozenset({RunStatus.COMPLETED})),
    # A completion recorded after the reaper declared its attempt dead, if none newer exists.
    "run_complete_late": (
        frozenset({RunStatus.PENDING, RunStatus.FAILED}),
        frozenset({RunStatus.COMPLETED}),
    ),
    # fail, release and reap end in cancelled when a cancel was requested meanwhile
    "run_fail": (
        frozenset({RunStatus.RUNNING}),
        frozenset({RunStatus.PENDING, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.CANCELLED}),
    ),
    "run_release": (
        frozenset({RunStatus.RUNNING}),
        frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    ),
    "run_reap": (
        frozenset({RunStatus.RUNNING}),
        frozenset({RunStatus.PENDING, RunStatus.FAILED, RunStatus.CANCELLED}),
    ),
    # a handler asked to run again later: pending without spending an attempt, failed
    # past the most snoozes allowed, cancelled if that was requested meanwhile
    "run_snooze": (
        frozenset({RunStatus.RUNNING}),
        frozenset({RunStatus.PENDING, RunStatus.FAILED, RunStatus.CANCELLED}),
    ),
    # a suspect whose process of its own died: re-queued, or quarantined (failed)
    "run_crash": (
        frozenset({RunStatus.RUNNING}),
        frozenset({RunStatus.PENDING, RunStatus.FAILED, RunStatus.CANCELLED}),
    ),
    # a running run stays running with cancel_requested until its worker stops it
    "run_cancel": (
        frozenset({RunStatus.PENDING, RunStatus.BLOCKED, RunStatus.RUNNING}),
        frozenset({RunStatus.CANCELLED, RunStatus.RUNNING}),
    ),
    # a step with upstreams still to complete stays blocked, one fewer to wait for; one
    # freed by a worker recording its last upstream's completion may start running at
    # once, leased to that worker (a claim in the same statement)
    "run_unblock": (
        frozenset({RunStatus.BLOCKED}),
        frozenset({RunStatus.PENDING, RunStatus.BLOCKED, RunStatus.RUNNING}),
    ),
    "run_skip": (frozenset({RunStatus.BLOCKED}), frozenset({RunStatus.SKIPPED})),
    # a run not started by its deadline
    "run_expire": (frozenset({RunStatus.PENDING}), frozenset({RunStatus.SKIPPED})),
    "run_retry": (
        frozenset({RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.CANCELLED}),
        frozenset({RunStatus.PENDING}),
    ),
    # A retried DAG step's dependents, skipped because it failed, wait for it again.
    "run_unskip": (frozenset({RunStatus.SKIPPED}), frozenset({RunStatus.BLOCKED})),
}
