"""Cancel, retry or re-run many runs at once: the runs list's filter (or the runs a person
ticked), counted and confirmed, then moved in batches. One rule for the runs page, the
API and `sundial runs cancel|retry|rerun`.

    action_id = start(conn, BulkVerb.CANCEL, Selection(where=RunFilter(status="failed")),
                      actor="alice", owner="web:host:123")
    while run_batch(conn, action_id, owner="web:host:123"):
        pass

`start` counts the runs, stores the action (table `bulk_actions`) and writes its one audit
entry (the filter and the count) in one transaction, and returns at once. Each
`run_batch` then takes the next `BATCH_SIZE` runs, newest first, below the action's keyset
cursor, moves them through `app.runs.transitions` (one conditional UPDATE per batch; a run
in a state the action does not apply to is left alone and counted as skipped) and moves
the cursor and the counts forward, all in one transaction: no batch is done twice, none
is lost. Runs newer than the newest one counted are not touched (the cursor starts below
it). The process working on an action holds a lease on it, renewed by every batch; when
that process dies, the lease runs out and another (any web process; `take_over`) goes on
from the cursor. The page says "interrupted" meanwhile.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import query
from app.handlers.gate import COMMAND_HANDLERS, HandlerDisabled, refuse_disabled_handlers
from app.people import audit
from app.runs import run_list, submission, transitions
from app.runs.run_inserts import NewRun
from app.runs.run_list import RunFilter

BATCH_SIZE = 1000  # runs per transaction
BATCH_TRIES = 5  # a batch rolled back by a deadlock is tried again this often
LEASE_SECONDS = 30.0  # a process that has not finished a batch for this long lost the action
MAX_TICKED = run_list.MAX_PAGE_SIZE  # ticked runs: at most one page's worth
RECENT_MINUTES = 30  # finished actions stay on the runs page this long
PAGING_FIELDS = frozenset({"before_id", "limit"})  # where a page starts, not which runs


class BulkVerb(StrEnum):
    CANCEL = "cancel"
    RETRY = "retry"
    RERUN = "rerun"


# The words for each verb: the imperative, the past participle, what a skipped run was.
WORDS: dict[BulkVerb, tuple[str, str, str]] = {
    BulkVerb.CANCEL: ("Cancel", "cancelled", "had already ended"),
    # A run in the history (app.runs.history) matches a filter but no retry reaches it.
    BulkVerb.RETRY: (
        "Retry",
        "queued again",
        "had not failed, timed out or been cancelled, or are in the history: re-run those",
    ),
    BulkVerb.RERUN: ("Re-run", "submitted again", "had not ended, or were steps of a workflow"),
}

# How a filter's field reads in a sentence; a field not named here reads as its name.
LABELS = {
    "status": "status",
    "job": "job",
    "schedule": "schedule",
    "dag_run_id": "workflow run",
    "since": "created from",
    "until": "created before",
    "error": "error contains",
    "queue": "queue",
    "search": "carrying",
}


@dataclass(frozen=True, slots=True)
class Selection:
    """Which runs: every run a filter matches, or the runs a person ticked."""

    where: RunFilter | None = None
    run_ids: tuple[int, ...] | None = None

    def check(self) -> Selection:
        if (self.where is None) == (self.run_ids is None):
            raise UsageError("say which runs: a filter, or the ids of the runs")
        if self.run_ids is not None:
            if not self.run_ids:
                raise UsageError("tick at least one run, or choose every run matching the filter")
            if len(self.run_ids) > MAX_TICKED:
                raise UsageError(
                    f"at most {MAX_TICKED} run ids at once; use a filter for more runs"
                )
            if any(i < 1 for i in self.run_ids):
                raise UsageError("run ids are positive whole numbers")
        else:
            assert self.where is not None
            self.where.check()
            for name, value in filter_fields(self.where).items():
                label = LABELS.get(name, name.replace("_", " "))
                if isinstance(value, datetime):
                    limits.check_instant(label, value)
                elif isinstance(value, str) and "\x00" in value:
                    raise UsageError(f"the {label} of the filter holds a NUL character")
        return self


def owner_name(process: str) -> str:
    """Who holds an action while working on it: `web:host:pid`."""
    return f"{process}:{socket.gethostname()}:{os.getpid()}"


# ---- the filter, stored and said in words --------------------------------------------------


def filter_fields(where: RunFilter) -> dict[str, Any]:
    """The filter's set fields (paging aside), every one of them, whatever they are."""
    return {
        f.name: value
        for f in dataclasses.fields(where)
        if f.name not in PAGING_FIELDS and (value := getattr(where, f.name)) is not None
    }


def filter_json(where: RunFilter) -> dict[str, Any]:
    """The filter as JSON: instants and ids as text."""
    return {
        name: value.isoformat() if isinstance(value, datetime) else
        str(value) if isinstance(value, uuid.UUID) else value
        for name, value in filter_fields(where).items()
    }  # fmt: skip


def filter_from_json(data: dict[str, Any]) -> RunFilter:
    """`filter_json` back into a RunFilter, by each field's declared type."""
    kinds = {f.name: str(f.type) for f in dataclasses.fields(RunFilter)}
    values: dict[str, Any] = {}
    for name, value in data.items():
        if name not in kinds or value is None:
            continue
        if "datetime" in kinds[name]:
            value = datetime.fromisoformat(value)
        elif "UUID" in kinds[name]:
            value = uuid.UUID(value)
        values[name] = value
    return RunFilter(**values)


def describe(selection: Selection) -> str:
    """`status failed, job nightly-report`, `#12, #13` (ticked runs), or `every run`."""
    if selection.run_ids is not None:
        shown = ", ".join(f"#{i}" for i in sorted(selection.run_ids)[:10])
        more = len(selection.run_ids) - 10
        return shown + (f" and {more} more" if more > 0 else "")
    assert selection.where is not None
    parts = []
    for name, value in filter_fields(selection.where).items():
        if isinstance(value, datetime):
            value = value.strftime("%Y-%m-%d %H:%M %Z").strip()
        elif isinstance(value, str) and name == "status":
            value = value.replace("_", " ")
        parts.append(f"{LABELS.get(name, name.replace('_', ' '))} {value}")
    return ", ".join(parts) if parts else "every run (no filter)"


def title(verb: BulkVerb, total: int, described: str, *, ticked: bool) -> str:
    """`Cancel 1,234 runs matching: status failed` or `Retry 2 ticked runs (#12, #13)`."""
    runs = f"{total:,} run{'' if total == 1 else 's'}"
    if ticked:
        return f"{WORDS[verb][0]} {total:,} ticked run{'' if total == 1 else 's'} ({described})"
    return f"{WORDS[verb][0]} {runs} matching: {described}"


def question(verb: BulkVerb, total: int, selection: Selection) -> str:
    """The confirmation a person reads: `Cancel 1,234 runs matching: status failed?`"""
    return title(verb, total, describe(selection), ticked=selection.run_ids is not None) + "?"


# ---- starting, and the batches -----------------------------------------------------------


def count(conn: Conn, selection: Selection) -> tuple[int, int | None]:
    """How many runs the selection holds now, and the newest one's id."""
    selection.check()
    if selection.where is not None:
        return run_list.count_matching(conn, selection.where)
    ids = set(selection.run_ids or ())  # ids of no run are skipped by the batches
    return len(ids), max(ids) if ids else None


def start(
    conn: Conn,
    verb: BulkVerb,
    selection: Selection,
    *,
    actor: str,
    owner: str,
    may_run_commands: bool = True,
    now: datetime | None = None,
) -> int:
    """Count the runs, store the action leased to `owner`, and audit it (one entry: the
    filter and the count), in one transaction. Returns the action's id; nothing has moved
    yet (see `run_batch`)."""
    with conn.transaction():
        total, newest = count(conn, selection)
        described = describe(selection)
        stored_filter = filter_json(selection.where) if selection.where is not None else None
        row = conn.execute(
            query("bulk_actions", "bulk_action_insert"),
            {
                "action": verb.value,
                "actor": actor,
                "filter": None if stored_filter is None else Jsonb(stored_filter),
                "run_ids": list(selection.run_ids) if selection.run_ids is not None else None,
                "described": described,
                "total": total,
                "cursor_id": _first_cursor(selection, newest),
                "may_run_commands": may_run_commands,
                "owner": owner,
                "lease_seconds": LEASE_SECONDS,
                "now": now,
            },
        ).fetchone()
        assert row is not None
        action_id = int(row["id"])
        audit.record(
            conn,
            actor,
            f"runs.bulk_{verb.value}",
            "bulk_action",
            str(action_id),
            after={
                "filter": stored_filter,
                "run_ids": list(selection.run_ids) if selection.run_ids is not None else None,
                "described": described,
                "count": total,
            },
        )
    return action_id


def run_batch(conn: Conn, action_id: int, *, owner: str, now: datetime | None = None) -> bool:
    """One batch of the action, in one transaction: True while runs remain. False also
    when `owner` no longer holds it (finished, or taken over after its lease ran out).

    A batch that meets a deadlock (a worker finishing some of its runs at that moment,
    locking them in another order) is rolled back whole and tried again."""
    for attempt in range(BATCH_TRIES):
        try:
            return _run_batch(conn, action_id, owner=owner, now=now)
        except (psycopg.errors.DeadlockDetected, transitions.RetryBusy):
            if attempt == BATCH_TRIES - 1:
                raise
            time.sleep(0.1 * (attempt + 1))
    return True  # not reached


def _run_batch(conn: Conn, action_id: int, *, owner: str, now: datetime | None) -> bool:
    with conn.transaction():
        action = conn.execute(
            query("bulk_actions", "bulk_action_lock"),
            {"id": action_id, "owner": owner, "lease_seconds": LEASE_SECONDS, "now": now},
        ).fetchone()
        if action is None:
            return False
        cursor = action["cursor_id"]
        ids = _next_ids(conn, action, cursor)
        verb = BulkVerb(action["action"])
        moved = _move(conn, verb, ids, may_run_commands=action["may_run_commands"], now=now)
        finished = len(ids) < BATCH_SIZE
        conn.execute(
            query("bulk_actions", "bulk_action_advance"),
            {
                "id": action_id,
                "owner": owner,
                "cursor_id": min(ids) if ids else cursor,
                "done": moved,
                "skipped": len(ids) - moved,
                "finished": finished,
                "now": now,
            },
        )
    return not finished


def _first_cursor(selection: Selection, newest: int | None) -> int | None:
    """Where the first batch starts: below the newest run counted (ticked runs: None, from
    the top). None for a filter means it matched nothing. A filter's newest run of the
    very last id a bigint holds (a sequence's end) stays out: the cursor is exclusive."""
    if selection.run_ids is not None or newest is None:
        return None
    return min(newest + 1, limits.MAX_RUN_ID)


def _next_ids(conn: Conn, action: dict[str, Any], cursor: int | None) -> list[int]:
    if action["run_ids"] is not None:
        ids = sorted(set(action["run_ids"]), reverse=True)
        return [i for i in ids if cursor is None or i < cursor][:BATCH_SIZE]
    if cursor is None:  # the filter matched nothing when it started
        return []
    where = filter_from_json(action["filter"] or {})
    return run_list.matching_ids(conn, where, before_id=cursor, limit=BATCH_SIZE)


def _move(
    conn: Conn,
    verb: BulkVerb,
    ids: Sequence[int],
    *,
    may_run_commands: bool,
    now: datetime | None,
) -> int:
    """Apply the verb to `ids`; how many it applied to (the rest are skipped)."""
    if verb is BulkVerb.CANCEL:
        return len(transitions.cancel_many(conn, ids, now=now))
    if verb is BulkVerb.RETRY:
        return len(transitions.retry_many(conn, ids, may_run_commands=may_run_commands, now=now))
    return _rerun(conn, ids, may_run_commands=may_run_commands, now=now)


def _rerun(conn: Conn, ids: Sequence[int], *, may_run_commands: bool, now: datetime | None) -> int:
    """A new run for each ended run of `ids` (not a DAG step): its job, handler, args,
    queue, priority and settings, submitted through `app.runs.submission`."""
    if not ids:
        return 0
    rows = conn.execute(
        query("bulk_actions", "bulk_rerun_sources"),
        {
            "ids": list(ids),
            "may_run_commands": may_run_commands,
            "command_handlers": sorted(COMMAND_HANDLERS),
        },
    ).fetchall()
    allowed = set()
    for handler in {row["handler"] for row in rows}:
        try:
            refuse_disabled_handlers(conn, {handler})
        except HandlerDisabled:
            continue
        allowed.add(handler)
    runs = [
        NewRun(
            handler=row["handler"],
            args=row["args"] or {},
            priority=row["priority"],
            timeout_seconds=row["timeout_seconds"],
            max_retries=row["max_retries"],
            execution_model=row["execution_model"],
            job_id=row["job_id"],
            queue=row["queue"],
        )
        for row in rows
        if row["handler"] in allowed
    ]
    return len(submission.submit_many(conn, runs, now=now)) if runs else 0


def run_all(conn: Conn, action_id: int, *, owner: str) -> None:
    """Every remaining batch of the action, one transaction each (the CLI's way)."""
    while run_batch(conn, action_id, owner=owner):
        pass


def release(conn: Conn, action_id: int, *, owner: str, now: datetime | None = None) -> None:
    """Let go of the action (a process shutting down): another takes it over at once."""
    params = {"id": action_id, "owner": owner, "now": now}
    conn.execute(query("bulk_actions", "bulk_action_release"), params)


def take_over(conn: Conn, *, owner: str, now: datetime | None = None) -> list[int]:
    """Lease to `owner` the unfinished actions whose process stopped working on them."""
    rows = conn.execute(
        query("bulk_actions", "bulk_action_take_over"),
        {"owner": owner, "lease_seconds": LEASE_SECONDS, "now": now},
    ).fetchall()
    return [int(r["id"]) for r in rows]


# ---- reading -----------------------------------------------------------------------------


def get(conn: Conn, action_id: int, *, now: datetime | None = None) -> dict[str, Any]:
    """One action with how far it got in words (`state`, `title`, `percent`)."""
    params = {"id": action_id, "now": now}
    row = conn.execute(query("bulk_actions", "bulk_action_by_id"), params).fetchone()
    if row is None:
        raise UsageError(f"there is no bulk action {action_id}")
    return _with_words(row)


def recent(conn: Conn, *, limit: int = 5, now: datetime | None = None) -> list[dict[str, Any]]:
    """Unfinished actions and those finished lately, newest first, for the runs page."""
    params = {"minutes": RECENT_MINUTES, "limit": limit, "now": now}
    rows = conn.execute(query("bulk_actions", "bulk_action_recent"), params).fetchall()
    return [_with_words(row) for row in rows]


def _with_words(row: dict[str, Any]) -> dict[str, Any]:
    verb = BulkVerb(row["action"])
    _, participle, why_skipped = WORDS[verb]
    handled = row["done"] + row["skipped"]
    total = row["total"]
    if row["status"] == "finished":
        state = f"{row['done']:,} {participle}"
        if row["skipped"]:
            state += f", {row['skipped']:,} skipped (they {why_skipped})"
    elif row["interrupted"]:
        state = (
            f"interrupted after {handled:,} of {total:,}: it goes on where it stopped as soon "
            "as a web process is running"
        )
    else:
        state = f"{handled:,} of {total:,} done so far"
    return {
        **row,
        "title": title(verb, total, row["described"], ticked=row["run_ids"] is not None),
        "state": state,
        "handled": handled,
        "percent": 100
        if row["status"] == "finished" or not total
        else min(100, round(100 * handled / total)),
    }
