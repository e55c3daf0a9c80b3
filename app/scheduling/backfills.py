"""Backfills: run a schedule's fires over a past range, on request, a few at a time.

Purpose: a person (dashboard, CLI or API) picks a past range in the schedule's own zone;
the backfill runs exactly the fires the schedule's rule gives for that range (the same
enumeration as the trigger and the previews, `app.scheduling.cron`, DST rule included),
oldest first, each run carrying its logical `fire_time`. Fires already in the fire
ledger (`schedule_fires`) are left alone: the ledger holds one decision per fire.

Use:

    shown = start(conn, "nightly", start=..., end=..., concurrency=2, dry_run=True, actor="ana")
    started = start(conn, "nightly", start=..., end=..., concurrency=2, actor="ana")
    fed = feed_all(conn)                 # the trigger, every tick, while it leads
    cancel(conn, started.backfill_id, actor="ana")

Feeding: under the backfill's row lock, while fewer than its cap of its runs are pending,
blocked or running, the next fires are submitted (`app.runs.submission.submit_fires`) and
written to the ledger (outcome `enqueued`, `backfill_id` set, linked to the run), and the
backfill's `next_from` moves past them, all in one transaction. Runs and ledger rows are
unique per (schedule, fire_time), so a crash or a second trigger never submits a fire
twice. The schedule's overlap policy applies among the backfill's own runs: with `allow`
up to the cap run at once; with `skip`, `queue` or `cancel` one at a time.

A backfill is done once every fire is submitted and its runs ended; cancelling it stops
the submissions and cancels its unfinished runs through `app.runs.transitions.cancel`
(pending ones at once, running ones asked to stop). Every start and cancel is audited.
Bad input raises `ScheduleError` with one sentence and creates nothing.

SQL: `app/core/sql/backfills.sql`. Telemetry: a log line per backfill started, done or
cancelled.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import limits
from app.core.db import Conn
from app.core.errors import Conflict, Missing, about
from app.core.sql import query
from app.people import audit
from app.runs import run_inserts, submission, transitions
from app.scheduling.cron import EPSILON, Fire, count_fires, fires_between
from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.fire_decisions import FireOutcome, OverlapPolicy
from app.scheduling.fire_ledger import FireRecord, record_fires
from app.scheduling.schedule_rules import db_now, recurrence_of
from app.scheduling.schedule_spec import ScheduleError
from app.scheduling.zones import dst_note

log = logging.getLogger(__name__)

MAX_FIRES = limits.MAX_BACKFILL_FIRES
MAX_CONCURRENCY = limits.MAX_BACKFILL_CONCURRENCY
LOOKAHEAD = 64  # rule fires read past the free slots, per ledger lookup
LISTED = 20  # fires listed by name in a preview (DST nights, fires left alone)
DETAIL = "backfill"  # the ledger's detail on a backfill's fires


class BackfillError(ScheduleError):
    """A backfill cannot be started or cancelled as asked; the message says why."""


class NoSuchBackfill(BackfillError, Missing):
    """No backfill has that id (or no schedule that name)."""


class BackfillEnded(BackfillError, Conflict):
    """The backfill has already ended: nothing to cancel."""


@dataclass(frozen=True, slots=True)
class LeftAlone:
    """A fire of the range already in the ledger, with what became of it then."""

    at: datetime
    local: datetime
    outcome: str


@dataclass(frozen=True, slots=True)
class Preview:
    """What a backfill of a range does, before (or as) it starts."""

    schedule: str
    timezone: str
    range_start: datetime
    range_end: datetime
    fires: list[Fire]  # the rule's fires of the range that it runs, oldest first
    left_alone: list[LeftAlone]  # the range's fires already in the ledger
    dst: list[tuple[Fire, str]]  # fires the clock change moved or doubled, with words
    overlap: str
    concurrency: int  # asked for
    at_once: int  # what runs at once, the overlap policy applied
    overlap_words: str
    backfill_id: uuid.UUID | None = None  # set once started
    notes: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.fires)

    @property
    def first(self) -> Fire | None:
        return self.fires[0] if self.fires else None

    @property
    def last(self) -> Fire | None:
        return self.fires[-1] if self.fires else None


def _lock_schedule(conn: Conn, name: str) -> dict[str, Any]:
    row = conn.execute(query("schedules", "schedule_lock_by_name"), {"name": name}).fetchone()
    if row is None:
        raise NoSuchBackfill(f"there is no schedule named {name!r}")
    return row


def at_once(overlap: str, concurrency: int) -> int:
    """How many of a backfill's runs may run at once: the cap, or one when the schedule's
    overlap policy does not let its runs overlap."""
    return concurrency if overlap == OverlapPolicy.ALLOW else 1


def overlap_words(overlap: str, concurrency: int) -> str:
    """How the schedule's overlap policy applies to a backfill, in words."""
    if overlap == OverlapPolicy.ALLOW:
        if concurrency == 1:
            return "This schedule lets its runs overlap; the backfill runs one at a time."
        return (f"This schedule lets its runs overlap, so up to {concurrency} of the "
                f"backfill's runs run at once.")  # fmt: skip
    words = {
        OverlapPolicy.SKIP: "skips a run while the previous one is still going",
        OverlapPolicy.QUEUE: "queues a run behind the previous one",
        OverlapPolicy.CANCEL: "cancels the previous run when a new one starts",
    }[OverlapPolicy(overlap)]
    return (f"This schedule {words}, so the backfill runs one at a time"
            + (f" (not {concurrency})" if concurrency > 1 else "") + ".")  # fmt: skip


def _preview(
    conn: Conn, row: Mapping[str, Any], start: datetime, end: datetime, concurrency: int,
    now: datetime,
) -> Preview:  # fmt: skip
    name = row["name"]
    if row["workflow_id"] is not None:
        raise BackfillError(
            f"schedule {name!r} runs a workflow; backfills work for schedules that run a job"
        )
    with about("concurrency"):
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise BackfillError(
                f"how many may run at once must be from 1 to {MAX_CONCURRENCY}, not {concurrency}"
            )
    zone = row["timezone"]
    with about("end"):
        if end < start:
            raise BackfillError("the end of the range is before its start; swap them")
        if end > now:
            raise BackfillError(
                "the end of the range is in the future; a backfill runs past fires only "
                "(the schedule runs the future ones itself)"
            )
    try:
        rule = recurrence_of(row)
    except RecurrenceError as exc:
        raise BackfillError(f"schedule {name!r} has a rule that cannot be used: {exc}") from None
    with about("end"):
        if not count_fires(rule, start, end + EPSILON, MAX_FIRES)[1]:
            raise BackfillError(
                f"that range holds more than {MAX_FIRES:,} fires of this schedule; "
                f"pick a shorter range (a backfill runs at most {MAX_FIRES:,})"
            )
        recorded = {
            r["fire_time"]: r
            for r in conn.execute(
                query("backfills", "fires_recorded_between"),
                {"schedule_id": row["id"], "start": start, "end": end},
            ).fetchall()
        }
        fires: list[Fire] = []
        left: list[LeftAlone] = []
        for fire in _range_fires(rule, start, end):
            done = recorded.get(fire.at)
            if done is not None:
                left.append(LeftAlone(fire.at, fire.local, done["outcome"]))
            else:
                fires.append(fire)
        if not fires and not left:
            raise BackfillError(f"schedule {name!r} has no fires in that range")
    dst = [(f, note) for f in fires if (note := dst_note(f.at, f.local, zone))]
    notes = []
    if row["calendar_id"] is not None:
        notes.append("Its exclusion calendar does not apply: every fire of the range runs.")
    if not row["active"]:
        notes.append("The schedule is paused; the backfill runs all the same.")
    return Preview(
        schedule=name,
        timezone=zone,
        range_start=start,
        range_end=end,
        fires=fires,
        left_alone=left,
        dst=dst,
        overlap=row["overlap"],
        concurrency=concurrency,
        at_once=at_once(row["overlap"], concurrency),
        overlap_words=overlap_words(row["overlap"], concurrency),
        notes=notes,
    )


def _range_fires(rule: Any, start: datetime, end: datetime) -> Iterator[Fire]:
    """The rule's fires in [start, end], both ends included: the trigger's enumeration."""
    return fires_between(rule, start, end + EPSILON)


def start(
    conn: Conn,
    name: str,
    *,
    start: datetime,
    end: datetime,
    concurrency: int = 1,
    dry_run: bool = False,
    actor: str,
    now: datetime | None = None,
) -> Preview:
    """Start a backfill of schedule `name` over [start, end] (its preview with the new
    backfill's id), or only preview it with `dry_run`. The trigger submits its fires."""
    with conn.transaction():
        row = _lock_schedule(conn, name)
        at = db_now(conn, now)
        shown = _preview(conn, row, start, end, concurrency, at)
        if dry_run:
            return shown
        if not shown.fires:
            raise BackfillError(
                "every fire in that range already ran or was decided; there is nothing to backfill"
            )
        backfill_id = uuid.uuid4()
        params = {
            "id": backfill_id,
            "schedule_id": row["id"],
            "range_start": start,
            "range_end": end,
            "concurrency": concurrency,
            "fire_count": len(shown.fires),
            "left_alone": len(shown.left_alone),
            "created_by": actor,
            "now": now,
        }
        conn.execute(query("backfills", "backfill_insert"), params)
        after = {
            "backfill_id": str(backfill_id),
            "from": start.isoformat(),
            "to": end.isoformat(),
            "concurrency": concurrency,
            "fires": len(shown.fires),
            "left_alone": len(shown.left_alone),
        }
        audit.record(conn, actor, "schedule.backfill", "schedule", name, after=after,
                     subject_id=row["id"], now=now)  # fmt: skip
    log.info(
        "backfill %s of schedule %s started: %d fires, %d at once",
        backfill_id, name, len(shown.fires), shown.at_once,
        extra={"schedule_id": row["id"]},
    )  # fmt: skip
    return Preview(**{**_fields(shown), "backfill_id": backfill_id})


def _fields(p: Preview) -> dict[str, Any]:
    return {f: getattr(p, f) for f in Preview.__dataclass_fields__}


@dataclass(frozen=True, slots=True)
class Cancelled:
    backfill_id: uuid.UUID
    cancelled: int  # runs that had not started, now cancelled
    asked_to_stop: int  # running runs asked to stop


def cancel(
    conn: Conn, backfill_id: uuid.UUID, *, actor: str, now: datetime | None = None
) -> Cancelled:
    """Cancel a running backfill: submit no more of its fires, cancel its runs not started
    yet, ask its running ones to stop (the existing cancel transition does both)."""
    with conn.transaction():
        row = conn.execute(
            query("backfills", "backfill_cancel"), {"id": backfill_id, "now": now}
        ).fetchone()
        if row is None:
            ended = _one(conn, backfill_id)["status"]
            raise BackfillEnded(f"backfill {backfill_id} is already {ended}; nothing to cancel")
        ids = [r["id"] for r in conn.execute(
            query("backfills", "backfill_active_run_ids"), {"id": backfill_id}
        ).fetchall()]  # fmt: skip
        cancelled = asked = 0
        for run_id in ids:
            status = transitions.cancel(conn, run_id, now=now)
            if status == "cancelled":
                cancelled += 1
            elif status is not None:
                asked += 1
        found = _one(conn, backfill_id)
        after = {"backfill_id": str(backfill_id), "cancelled": cancelled, "asked_to_stop": asked}
        audit.record(conn, actor, "schedule.backfill_cancel", "schedule", found["schedule"],
                     after=after, subject_id=row["schedule_id"], now=now)  # fmt: skip
    log.info("backfill %s cancelled: %d runs cancelled, %d asked to stop",
             backfill_id, cancelled, asked)  # fmt: skip
    return Cancelled(backfill_id, cancelled, asked)


def _one(conn: Conn, backfill_id: uuid.UUID) -> dict[str, Any]:
    rows = listed(conn, backfill_id=backfill_id)
    if not rows:
        raise NoSuchBackfill(f"there is no backfill {backfill_id}")
    return rows[0]


def parse_id(text: str) -> uuid.UUID:
    """A backfill's id from what a person typed."""
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise NoSuchBackfill(f"{text!r} is not a backfill id (they look like 1b4e28ba-…)") from None


def listed(
    conn: Conn,
    *,
    schedule_id: uuid.UUID | None = None,
    backfill_id: uuid.UUID | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """Backfills (of a schedule, or one by id), newest first, each with its progress:
    `done`, `running`, `waiting` (submitted and not started, or not submitted yet),
    `failed` and `stopped` (cancelled or skipped)."""
    params = {"schedule_id": schedule_id, "id": backfill_id, "limit": limit}
    rows = conn.execute(query("backfills", "backfill_list"), params).fetchall()
    for r in rows:
        unsubmitted = r["fire_count"] - r["submitted"]
        r["done"] = r["completed"]
        r["waiting"] = r["pending"] + (unsubmitted if r["status"] == "running" else 0)
        r["not_run"] = unsubmitted if r["status"] == "cancelled" else 0
        r["at_once"] = at_once(r["overlap"], r["concurrency"])
    return rows


# ---- feeding (the trigger) ----------------------------------------------------------------


def feed_all(conn: Conn, now: datetime | None = None) -> int:
    """Feed every running backfill (see `feed`); how many runs were submitted."""
    ids = [r["id"] for r in conn.execute(query("backfills", "backfill_running_ids")).fetchall()]
    made = 0
    for backfill_id in ids:
        try:
            made += feed(conn, backfill_id, now)
        except RecurrenceError as exc:  # its schedule's rule broke since: the trigger stops
            # that schedule; the backfill waits (a person cancels it or mends the rule)
            log.error("backfill %s cannot go on: %s", backfill_id, exc)
    return made


def feed(conn: Conn, backfill_id: uuid.UUID, now: datetime | None = None) -> int:
    """Submit a running backfill's next fires while fewer than its cap of its runs are
    pending, blocked or running, in one transaction under its row lock; mark it done once
    its range is submitted and its runs ended. How many runs were submitted."""
    with conn.transaction():
        row = conn.execute(
            query("backfills", "backfill_lock_running"), {"id": backfill_id}
        ).fetchone()
        if row is None:  # ended, or another trigger is feeding it
            return 0
        free = at_once(row["overlap"], row["concurrency"]) - row["active"]
        made = 0
        if free > 0 and row["next_from"] <= row["range_end"] and row["job_id"] is not None:
            made = _submit(conn, row, free, now)
        if made == 0:
            done = conn.execute(
                query("backfills", "backfill_finish"), {"id": backfill_id, "now": now}
            ).fetchone()
            if done is not None:
                log.info("backfill %s of schedule %s done", backfill_id, row["name"],
                         extra={"schedule_id": row["schedule_id"]})  # fmt: skip
    return made


def _recorded(conn: Conn, schedule_id: uuid.UUID, start: datetime, end: datetime) -> set[datetime]:
    """The fire times of a schedule in [start, end] already in the ledger."""
    params = {"schedule_id": schedule_id, "start": start, "end": end}
    rows = conn.execute(query("backfills", "fires_recorded_between"), params).fetchall()
    return {r["fire_time"] for r in rows}


def _submit(conn: Conn, row: Mapping[str, Any], free: int, now: datetime | None) -> int:
    """Up to `free` of the backfill's next fires: runs, ledger rows, and the move forward."""
    start, end = row["next_from"], row["range_end"]
    picked: list[Fire] = []
    fires = _range_fires(recurrence_of(row), start, end)
    # The ledger is read a slice of fires at a time: a tick costs the fires it submits,
    # not the rest of the range.
    while len(picked) < free and (chunk := list(itertools.islice(fires, free + LOOKAHEAD))):
        recorded = _recorded(conn, row["schedule_id"], chunk[0].at, chunk[-1].at)
        for fire in chunk:
            if fire.at not in recorded:
                picked.append(fire)
                if len(picked) == free:
                    break
    # Past the last fire submitted; past the range once the rule has no more fires in it.
    next_from = picked[-1].at + EPSILON if len(picked) == free else end + EPSILON
    at = db_now(conn, now)
    requests = [
        run_inserts.FireRequest(row["schedule_id"], row["job_id"], f.at, at) for f in picked
    ]
    run_ids = submission.submit_fires(conn, requests) if requests else []
    records = [
        FireRecord(
            row["schedule_id"],
            f.at,
            f.local,
            FireOutcome.ENQUEUED,
            link=f.at,
            detail=DETAIL,
            run_id=run_id,
            backfill_id=row["id"],
        )
        for f, run_id in zip(picked, run_ids, strict=True)
        if run_id is not None  # another fire path made this fire's run meanwhile
    ]
    record_fires(conn, records, now)
    moved = {"id": row["id"], "previous": start, "next_from": next_from}
    conn.execute(query("backfills", "backfill_advance"), moved)
    return len(records)
