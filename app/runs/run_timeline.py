"""A run's life as a list of events, oldest first, like a workflow engine's event history:
each transition with its time, who or what made it (a worker, the reaper, a person, an API
token, the command line, a schedule, the DAG, Sundial itself) and what it means in words.

Built only from what Sundial already keeps: the run's row, its finished attempts
(`job_run_attempts`), the actions people took on it (the audit log's `run.*` entries), its
DAG upstreams, and the breaker changes of the services its job calls
(`app.runs.breaker_events`). Where those records cannot say who did something (a run
submitted through the API or the command line is not audited; a job's or a workflow's "run
now" is) the actor is `unknown`;
where they cannot say when, `at` is None. Nothing is guessed.

    for event in events_of_run(conn, run_id) or []:
        print(event.at, event.summary, event.actor.words, event.detail)
        # 2026-12-04 10:31:58+00 Attempt 1 failed; it will be tried again  worker w-1  boom
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.core.db import Conn
from app.core.sql import query
from app.people.audit import CLI_ACTOR
from app.runs import breaker_events
from app.runs.breakers import SYSTEM_ACTOR

MAX_ACTIONS = 200  # people's latest actions on one run; older ones stay in the audit log
ACTIONS = ("run.cancel", "run.retry", "run.retry_with_args")
ENDED = frozenset({"completed", "failed", "timed_out", "cancelled", "skipped"})
# A run that waits this much longer than its creation was delayed on purpose.
DELAYED_SECONDS = 1.0
# Sundial's own changes: the breaker rules', and the schedules' (app.scheduling.schedules
# names them `system`; that package sits above this one).
SYSTEM_ACTORS = frozenset({SYSTEM_ACTOR, "system"})
_API_ACTOR = re.compile(r"^(?P<user>.*) \(api token (?P<token>\w+)\)$")
_CLI_PREFIX = CLI_ACTOR + ":"  # before the operating-system user


class EventKind(StrEnum):
    """What happened to the run."""

    SUBMITTED = "submitted"  # created: submitted, fired by a schedule, started by hand
    DUE = "due"  # a delayed run's delay is over
    RELEASED = "released"  # a DAG step's upstreams all completed
    STARTED = "started"  # a worker claimed it: a new attempt
    CANCEL_REQUESTED = "cancel_requested"  # running: its worker is asked to stop it
    COMPLETED = "completed"
    RETRY_SCHEDULED = "retry_scheduled"  # an attempt failed or timed out; tried again later
    SNOOZED = "snoozed"  # its job asked to run again later, no attempt used
    LEASE_EXPIRED = "lease_expired"  # its worker stopped answering; the reaper put it back
    HANDED_BACK = "handed_back"  # back in the queue without using an attempt
    CRASHED = "crashed"  # its own process died; back in the queue
    FAILED = "failed"  # ended: a dead letter
    TIMED_OUT = "timed_out"  # ended: a dead letter
    QUARANTINED = "quarantined"  # ended (failed) after too many crashes
    CANCELLED = "cancelled"
    SKIPPED = "skipped"  # ended without running: expired, or an upstream did not complete
    RETRIED = "retried"  # a person queued it again after it ended
    BREAKER = "breaker"  # the circuit breaker of a service its job calls changed


class ActorKind(StrEnum):
    """Who or what made a change."""

    WORKER = "worker"
    REAPER = "reaper"
    PERSON = "person"  # signed in to the dashboard
    API = "api"  # a person's API token
    CLI = "cli"  # the command line, as an operating-system user
    SCHEDULE = "schedule"
    DAG = "dag"
    SYSTEM = "system"  # Sundial's own rules
    UNKNOWN = "unknown"  # the records do not say


@dataclass(frozen=True, slots=True)
class Actor:
    """Who or what made a change: `kind` is worker, reaper, person, api, cli, schedule,
    dag, system or unknown; `name` the worker id, user name, schedule or step (None when
    the kind says it all); `words` how a person reads it."""

    kind: str
    name: str | None
    words: str


UNKNOWN = Actor("unknown", None, "unknown")
REAPER = Actor("reaper", None, "the reaper")
SYSTEM = Actor("system", None, "Sundial")


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One thing that happened to a run. `until` is a time the event points at: for
    `submitted` when it is due (delayed), `retry_scheduled` the next try, `snoozed` when it
    is due again, `skipped` (expired) its deadline; None when there is none or it is no
    longer known."""

    at: datetime | None  # None: the records do not say when
    kind: str
    actor: Actor
    summary: str
    detail: str | None = None
    attempt: int | None = None
    until: datetime | None = None
    # For `breaker`: the service (dependency) whose breaker changed, and its new state.
    service: str | None = None
    breaker_state: str | None = None


def actor_of(recorded: str) -> Actor:
    """The audit log's actor as a person reads it: `alice`, `alice (api token 3)`,
    `cli:bob`, or Sundial's own rules."""
    if recorded in SYSTEM_ACTORS:
        return SYSTEM
    if recorded.startswith(_CLI_PREFIX) or recorded == CLI_ACTOR:
        user = recorded[len(_CLI_PREFIX) :]  # "" for plain `cli`: the user was unknown
        return Actor("cli", user or None, f"{user or 'someone'} on the command line")
    api = _API_ACTOR.match(recorded)
    if api:
        return Actor("api", api["user"], f"{api['user']} with API token {api['token']}")
    return Actor("person", recorded, recorded)


def _worker(name: str | None) -> Actor:
    return Actor("worker", name, f"worker {name}") if name else Actor("worker", None, "a worker")


def events_of_run(conn: Conn, run_id: int, now: datetime | None = None) -> list[RunEvent] | None:
    """The run's events, oldest first (events whose time is unknown last); None when
    there is no such run."""
    run = conn.execute(
        query("run_timeline", "run_timeline_run"), {"id": run_id, "now": now}
    ).fetchone()
    if run is None:
        return None
    params = {"id": run_id}
    attempts = conn.execute(query("run_timeline", "run_timeline_attempts"), params).fetchall()
    actions = conn.execute(
        query("run_timeline", "run_timeline_actions"),
        {**params, "now": now, "actions": list(ACTIONS), "limit": MAX_ACTIONS},
    ).fetchall()
    upstreams = []
    if run["dag_run_id"] is not None:
        upstreams = conn.execute(query("run_timeline", "run_timeline_upstreams"), params).fetchall()
    breakers = breaker_events.events_of_run(conn, run_id, now)
    return assemble(run, attempts, list(reversed(actions)), upstreams, breakers)


def assemble(
    run: dict[str, Any],
    attempts: Sequence[dict[str, Any]],
    actions: Sequence[dict[str, Any]],
    upstreams: Sequence[dict[str, Any]] = (),
    breakers: Sequence[breaker_events.BreakerEvent] = (),
) -> list[RunEvent]:
    """The events of one run from its records (pure): `actions` are its audit entries
    oldest first, `attempts` its finished attempts by number."""
    events = [_submitted(run, attempts, actions, upstreams)]
    if (due := _due(run, attempts, actions, upstreams)) is not None:
        events.append(due)
    if (released := _released(run, upstreams)) is not None:
        events.append(released)
    # Attempts and people's actions interleave: a failure's meaning (tried again, or the
    # end) depends on what came next.
    facts: list[tuple[datetime, int, str, dict[str, Any]]] = []
    for a in attempts:
        if a["started_at"] is not None:
            facts.append((a["started_at"], 0, "start", a))
        facts.append((a["finished_at"], 1, "end", a))
    facts += [(x["at"], 2, "action", x) for x in actions]
    facts.sort(key=lambda f: (f[0], f[1]))
    last_attempt = attempts[-1]["attempt"] if attempts else None
    for n, (_, _, what, thing) in enumerate(facts):
        if what == "start":
            events.append(_started(thing))
        elif what == "action":
            events.append(_action(thing))
        else:
            later = facts[n + 1 :]
            cancel_asked = any(
                f[2] == "action" and _asked_to_stop(f[3])
                and (thing["started_at"] is None or f[0] >= thing["started_at"])
                for f in facts[:n]
            )  # fmt: skip
            events.append(
                _ended_attempt(run, thing, later, thing["attempt"] == last_attempt, cancel_asked)
            )
    if run["status"] == "running":
        events.append(
            RunEvent(
                run["started_at"], "started", _worker(run["lease_owner"]),
                f"Attempt {run['attempt']} started", attempt=run["attempt"],
            )
        )  # fmt: skip
        if run["cancel_requested"] and not any(
            _asked_to_stop(x) and x["at"] >= run["started_at"] for x in actions
        ):
            events.append(
                RunEvent(None, "cancel_requested", UNKNOWN, "Asked to stop",
                         "Who asked, and when, is not recorded (a DAG run cancelled as a whole).")
            )  # fmt: skip
    ending = _run_ending(run, events)
    if ending is not None:
        events.append(ending)
    events += [_breaker(e) for e in breakers]
    events.sort(key=lambda e: (e.at is None, e.at or run["created_at"]))
    return events


# ---- where the run came from ---------------------------------------------------------------


def _submitted(
    run: dict[str, Any],
    attempts: Sequence[dict[str, Any]],
    actions: Sequence[dict[str, Any]],
    upstreams: Sequence[dict[str, Any]],
) -> RunEvent:
    step = f"step {run['dag_node']}" if run["dag_node"] else "a step"
    by_hand = actor_of(run["started_by"]) if run["started_by"] else None
    schedule_id = run["schedule_id"] or run["dag_schedule_id"]
    schedule = run["schedule_name"] or run["dag_schedule_name"]
    schedule_words = f"schedule {schedule}" if schedule else "a deleted schedule"
    workflow = f"workflow {run['workflow_name']}" if run["workflow_name"] else "a workflow"
    what = f" as {step} of {workflow}" if run["workflow_id"] else ""
    if run["dag_run_id"] and not run["workflow_id"]:
        what = f" as {step} of DAG run {run['dag_name'] or run['dag_run_id']}"
    detail = None
    if schedule_id is not None and run["manual_fire"]:
        summary = f"Started by hand from {schedule_words}{what} (run now)"
        actor = by_hand or UNKNOWN
        if by_hand is None:
            detail = "Who pressed run now is not recorded."
    elif schedule_id is not None:
        summary = f"Fired by {schedule_words}{what}"
        actor = Actor("schedule", schedule, schedule_words)
    elif run["workflow_id"]:
        summary = f"Started{what}"
        actor = by_hand or UNKNOWN
        if by_hand is None:
            detail = "Who started the workflow is not recorded."
    elif by_hand is not None:  # a job's "Run now" (job.run), with arguments chosen then
        summary = "Started by hand (run now)"
        actor = by_hand
    else:
        summary = f"Submitted{what}"
        actor = UNKNOWN
        detail = "Who submitted it is not recorded (the API, the command line or a program)."
    if upstreams:
        waits = f"It waits for {len(upstreams)} upstream step{'s' if len(upstreams) > 1 else ''}."
        detail = f"{detail} {waits}" if detail else waits
    until = run["run_at"] if _delayed(run, attempts, actions, upstreams) else None
    return RunEvent(run["created_at"], "submitted", actor, summary, detail, until=until)


def _delayed(
    run: dict[str, Any],
    attempts: Sequence[dict[str, Any]],
    actions: Sequence[dict[str, Any]],
    upstreams: Sequence[dict[str, Any]],
) -> bool:
    """Its `run_at` is still the one it was submitted with, later than its creation: no
    attempt ended, no person retried it, no upstream released it (each moves run_at)."""
    return (
        not attempts
        and not upstreams
        and not any(x["action"] != "run.cancel" for x in actions)
        and (run["run_at"] - run["created_at"]).total_seconds() > DELAYED_SECONDS
    )


def _due(
    run: dict[str, Any],
    attempts: Sequence[dict[str, Any]],
    actions: Sequence[dict[str, Any]],
    upstreams: Sequence[dict[str, Any]],
) -> RunEvent | None:
    """A delayed run became due (its delay is over by the time of the read), unless it
    had ended before that."""
    if not _delayed(run, attempts, actions, upstreams) or run["run_at"] > run["read_at"]:
        return None
    if run["finished_at"] is not None and run["finished_at"] <= run["run_at"]:
        return None
    return RunEvent(run["run_at"], "due", SYSTEM, "Due: its delay is over, it waits for a worker")


def _released(run: dict[str, Any], upstreams: Sequence[dict[str, Any]]) -> RunEvent | None:
    """A DAG step is released (blocked -> pending) in the transaction that completes its
    last upstream: at the latest of their finishes, once all completed."""
    if not upstreams or run["status"] == "blocked":
        return None
    if any(u["status"] != "completed" or u["finished_at"] is None for u in upstreams):
        return None
    last = max(upstreams, key=lambda u: u["finished_at"])
    name = last["dag_node"] or f"run {last['id']}"
    return RunEvent(
        last["finished_at"], "released", Actor("dag", name, f"upstream step {name}"),
        "Released: its upstream steps completed",
        f"The last of them to complete was {name} (run {last['id']}).",
    )  # fmt: skip


# ---- attempts -------------------------------------------------------------------------------


def _never_began(a: dict[str, Any]) -> bool:
    return a["outcome"] == "released" and (a["error"] or "").startswith("lease expired before")


def _started(a: dict[str, Any]) -> RunEvent:
    n = a["attempt"]
    if _never_began(a):
        return RunEvent(a["started_at"], "started", _worker(a["worker"]),
                        f"Attempt {n} picked up", attempt=n)  # fmt: skip
    return RunEvent(a["started_at"], "started", _worker(a["worker"]), f"Attempt {n} started",
                    attempt=n)  # fmt: skip


def _asked_to_stop(action: dict[str, Any]) -> bool:
    after = (action["details"] or {}).get("after") or {}
    return action["action"] == "run.cancel" and after.get("status") == "running"


def _ended_attempt(
    run: dict[str, Any],
    a: dict[str, Any],
    later: Sequence[tuple[datetime, int, str, dict[str, Any]]],
    is_last: bool,
    cancel_asked: bool,
) -> RunEvent:
    """How attempt `a` ended, and what that did to the run: tried again, put back in the
    queue, or the run's end. `later` are the attempt starts, ends and people's actions
    after it."""
    n, outcome, error = a["attempt"], a["outcome"], a["error"]
    worker = _worker(a["worker"])

    def event(kind: str, actor: Actor, summary: str, until: datetime | None = None) -> RunEvent:
        return RunEvent(a["finished_at"], kind, actor, summary, error, n, until)

    if outcome == "completed":
        return event("completed", worker, "Completed")
    status = _status_after(run, a, _ended_run(run, a, later, is_last), is_last, cancel_asked)
    # run_at still holds the time this attempt put the run back for, if nothing moved it
    until = run["run_at"] if is_last and not any(f[2] == "action" for f in later) else None
    if outcome == "released":
        if _never_began(a):
            who, why = REAPER, f"Its worker ({a['worker']}) stopped before the job began"
        else:
            who, why = worker, "Its worker was shutting down"
        if status == "cancelled":
            return event("cancelled", who, f"{why}; cancelled, as was asked")
        return event("handed_back", who, f"{why}: handed back to the queue, no attempt used")
    if outcome == "lost":
        if status == "cancelled":
            return event("cancelled", REAPER, "Its worker stopped answering; cancelled, as asked")
        if status == "failed":
            return event("quarantined", REAPER, "Quarantined: its workers died under it too often")
        return event("lease_expired", REAPER,
                     "Its worker stopped answering (lease expired): back in the queue")  # fmt: skip
    if outcome == "snoozed":
        if status == "pending":
            return event("snoozed", worker, "Snoozed by its job, no attempt used", until)
        if status == "cancelled":
            return event("cancelled", worker, "Snoozed; cancelled, as was asked")
        return event("failed", worker, "Failed: it snoozed more times than allowed")
    crash = (error or "").startswith("crashed in a process of its own")
    quarantine = (error or "").startswith("quarantined after")
    if status == "pending":
        if crash:
            return event("crashed", worker, f"Attempt {n} crashed its process: back in the queue")
        what = "timed out" if outcome == "timed_out" else "failed"
        return event("retry_scheduled", worker, f"Attempt {n} {what}; it will be tried again",
                     until)  # fmt: skip
    if status == "cancelled":
        stopped = "Cancelled: its worker stopped it, as was asked" if cancel_asked else "Cancelled"
        return event("cancelled", worker, stopped)
    if quarantine or (is_last and run["quarantined"]):
        return event("quarantined", worker, "Quarantined: it crashed its process too often")
    if status == "timed_out":
        return event("timed_out", worker, "Timed out for good: a dead letter, not tried again")
    return event("failed", worker, "Failed for good: a dead letter, not tried again")


def _ended_run(
    run: dict[str, Any],
    a: dict[str, Any],
    later: Sequence[tuple[datetime, int, str, dict[str, Any]]],
    is_last: bool,
) -> bool:
    """Whether attempt `a`'s end was the run's end (else the run went back to the queue)."""
    if a["requeued"] is not None:  # the reaper, a crash or a snooze said so
        return not a["requeued"]
    nxt = next((f for f in later if f[2] in ("start", "action")), None)
    if nxt is not None:
        # Only a person's retry brings an ended run back; anything else found it waiting.
        return nxt[2] == "action" and nxt[3]["action"] != "run.cancel"
    return is_last and run["status"] in ENDED and run["finished_at"] == a["finished_at"]


def _status_after(
    run: dict[str, Any], a: dict[str, Any], ended: bool, is_last: bool, cancel_asked: bool
) -> str:
    """The run's status right after attempt `a` ended."""
    if not ended:
        return "pending"
    if is_last and run["finished_at"] == a["finished_at"]:
        return str(run["status"])
    if cancel_asked or a["outcome"] == "cancelled":
        return "cancelled"
    if a["outcome"] in ("lost", "snoozed"):
        return "failed"  # quarantined, or snoozed too often
    if a["outcome"] == "released":
        return "cancelled"  # the only way a hand-back ends a run
    return str(a["outcome"])


# ---- people's actions, the run's own end, the breakers -------------------------------------


_WAS = {
    "pending": "It was waiting to run.",
    "blocked": "It was waiting for its upstream steps.",
    "running": "It was running.",
    "failed": "It had failed.",
    "timed_out": "It had timed out.",
    "cancelled": "It had been cancelled.",
}


def _action(x: dict[str, Any]) -> RunEvent:
    actor = actor_of(x["actor"])
    before = (x["details"] or {}).get("before") or {}
    was = _WAS.get(str(before.get("status")))
    if x["action"] == "run.cancel":
        if _asked_to_stop(x):
            return RunEvent(x["at"], "cancel_requested", actor,
                            "Asked to stop: its worker stops it at its next heartbeat")  # fmt: skip
        return RunEvent(x["at"], "cancelled", actor, "Cancelled", was)
    if x["action"] == "run.retry_with_args":
        return RunEvent(x["at"], "retried", actor, "Retried with new arguments", was)
    return RunEvent(x["at"], "retried", actor, "Retried, with a fresh retry budget", was)


def _run_ending(run: dict[str, Any], events: Sequence[RunEvent]) -> RunEvent | None:
    """The run's end when no attempt or audited action accounts for it."""
    at = run["finished_at"]
    if run["status"] not in ENDED or at is None:
        return None
    if any(e.at == at and e.kind in _ENDINGS for e in events):
        return None
    if run["status"] == "skipped":
        if run["skip_reason"] == "expired":
            return RunEvent(at, "skipped", REAPER, "Skipped: it had not started by its deadline",
                            until=run["deadline"])  # fmt: skip
        if run["skip_reason"] == "upstream_failed":
            return RunEvent(at, "skipped", Actor("dag", None, "its DAG run"),
                            "Skipped: an upstream step did not complete")  # fmt: skip
        return RunEvent(at, "skipped", UNKNOWN, "Skipped", run["skip_reason"])
    if run["status"] == "cancelled":
        return RunEvent(at, "cancelled", UNKNOWN, "Cancelled", _UNRECORDED_CANCEL)
    words = str(run["status"]).replace("_", " ").capitalize()
    return RunEvent(at, str(run["status"]), UNKNOWN, words, run["last_error"])


_UNRECORDED_CANCEL = "Who cancelled it is not recorded (a DAG run cancelled as a whole)."
_ENDINGS = frozenset({"completed", "failed", "timed_out", "cancelled", "quarantined", "skipped"})


def _breaker(e: breaker_events.BreakerEvent) -> RunEvent:
    return RunEvent(e.at, "breaker", actor_of(e.actor), e.words, service=e.dependency,
                    breaker_state=e.state)  # fmt: skip
