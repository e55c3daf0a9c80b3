"""Dead letters triage: failed and timed-out runs grouped by error fingerprint.

Where the fingerprint comes from: the failing transition (`transitions.finish_many`, the
reaper) stores it on the run, computed in Python by `app.runs.fingerprints` from the attempt's
error and traceback. Grouping is then a scan of one partial index (fingerprint,
finished_at) over dead letters only — no text processing at read time, so the page stays
fast at a million runs — and a fingerprint never changes after the fact.

What a person may do, each audited in the transaction of the change:
- retry one run, some runs, or a whole group (after `group_count`, the dry run) — the
  `transitions.retry` transition, failed | timed_out -> pending;
- edit a run's args and retry it;
- resolve or discard a group with a reason: its runs up to the newest one leave the page
  (nothing is deleted; retention prunes them), and a later failure reopens the group.

The pages read hot and history as one (`all_runs`): a dead letter older than
SUNDIAL_DEAD_LETTER_DAYS has moved to the history and still counts in its group, but no
retry reaches it there (a re-run, a new run with its args, does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import query
from app.people import audit
from app.runs import moved_runs, transitions
from app.runs.fingerprints import fingerprint_of

GROUPS_SHOWN = 100
GROUP_RUNS_SHOWN = 200
MAX_RETRY_AT_ONCE = 10_000
MAX_REASON_CHARS = 2_000
SPARK_HOURS = 24
COUNT_CAP = 10_000  # a group's runs are counted up to this, then shown as "10,000+"
AUDIT_ACTIONS = {"resolved": "dead_letters.resolve", "discarded": "dead_letters.discard"}
ACTIONS = tuple(AUDIT_ACTIONS)


class DeadLetterError(UsageError):
    """Input a person can fix, with the form field it concerns."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Group:
    fingerprint: str
    runs: int
    first_seen: datetime
    last_seen: datetime
    sample_run_id: int
    handler: str
    status: str
    sample_error: str
    exception: str
    message: str  # normalised
    frame: str
    hourly: list[int] = field(default_factory=list)  # oldest hour first, SPARK_HOURS long

    @property
    def runs_shown(self) -> str:
        """The count as the pages show it: exact up to COUNT_CAP, then "10,000+"."""
        return f"{COUNT_CAP:,}+" if self.runs > COUNT_CAP else str(self.runs)


def _q(name: str) -> Any:
    return query("dead_letters", name)


def groups(conn: Conn, *, now: datetime | None = None, limit: int = GROUPS_SHOWN) -> list[Group]:
    """Open groups, most recently failing first, with 24 hourly counts each; a group's
    `runs` is exact up to COUNT_CAP (then COUNT_CAP + 1: see `Group.runs_shown`)."""
    rows = conn.execute(
        _q("dead_letter_groups"), {"limit": limit, "count_cap": COUNT_CAP}
    ).fetchall()
    hourly = _hourly(conn, [r["fingerprint"] for r in rows], now)
    return [_group(r, hourly.get(r["fingerprint"])) for r in rows]


def group(conn: Conn, fingerprint: str, *, now: datetime | None = None) -> Group | None:
    """One open group, or None when it has no open runs."""
    row = conn.execute(
        _q("dead_letter_group"), {"fingerprint": fingerprint, "count_cap": COUNT_CAP}
    ).fetchone()
    if row is None:
        return None
    return _group(row, _hourly(conn, [fingerprint], now).get(fingerprint))


def _group(row: dict[str, Any], hourly: list[int] | None) -> Group:
    print_ = fingerprint_of(row["last_error"], row["traceback"])
    return Group(
        fingerprint=row["fingerprint"],
        runs=row["runs"],
        first_seen=row["first_seen"],
        last_seen=row["last_seen"],
        sample_run_id=row["sample_run_id"],
        handler=row["handler"],
        status=row["status"],
        sample_error=row["last_error"] or "",
        exception=print_.exception,
        message=print_.message,
        frame=print_.frame,
        hourly=hourly or [0] * SPARK_HOURS,
    )


def _hourly(conn: Conn, fingerprints: list[str], now: datetime | None) -> dict[str, list[int]]:
    if not fingerprints:
        return {}
    rows = conn.execute(
        _q("dead_letter_hourly"), {"fingerprints": fingerprints, "now": now}
    ).fetchall()
    series = {fp: [0] * SPARK_HOURS for fp in fingerprints}
    for r in rows:
        if 0 <= r["hours_ago"] < SPARK_HOURS:
            series[r["fingerprint"]][SPARK_HOURS - 1 - r["hours_ago"]] += r["n"]
    return series


def group_runs(
    conn: Conn, fingerprint: str, *, limit: int = GROUP_RUNS_SHOWN
) -> list[dict[str, Any]]:
    return conn.execute(
        _q("dead_letter_group_runs"), {"fingerprint": fingerprint, "limit": limit}
    ).fetchall()


@dataclass(frozen=True, slots=True)
class GroupCount:
    """The dry run of `retry_group`."""

    runs: int  # open dead letters in the group
    hot: int  # of those, the ones still in the hot tables, where a retry reaches them

    @property
    def retryable(self) -> int:
        """What `retry_group` re-queues now."""
        return min(self.hot, MAX_RETRY_AT_ONCE)

    @property
    def in_history(self) -> int:
        """Open, but moved to the history: no retry reaches them (a re-run does)."""
        return max(0, self.runs - self.hot)


def group_count(conn: Conn, fingerprint: str, /) -> GroupCount:
    """The dry run of `retry_group`: the group's open runs, and how many of them it
    reaches."""
    row = conn.execute(_q("dead_letter_group_count"), {"fingerprint": fingerprint}).fetchone()
    return GroupCount(row["runs"], row["hot"]) if row else GroupCount(0, 0)


def get_run(conn: Conn, run_id: int) -> dict[str, Any] | None:
    row: dict[str, Any] | None = conn.execute(_q("dead_letter_run"), {"id": run_id}).fetchone()
    return row


def retry_runs(
    conn: Conn, run_ids: list[int], *, actor: str, now: datetime | None = None
) -> list[int]:
    """failed | timed_out -> pending for each of these runs that is still a dead letter;
    returns those re-queued. One transaction, one audit row per run."""
    if not run_ids:
        raise DeadLetterError("choose at least one run to retry", "run_ids")
    if len(run_ids) > MAX_RETRY_AT_ONCE:
        raise DeadLetterError(f"retry at most {MAX_RETRY_AT_ONCE:,} runs at once", "run_ids")
    retried: list[int] = []
    with conn.transaction():
        for run_id in sorted(set(run_ids)):
            before = get_run(conn, run_id)
            if before is None or before["status"] not in ("failed", "timed_out"):
                continue
            if transitions.retry(conn, run_id, now=now) is None:
                continue
            audit.record(
                conn, actor, "run.retry", "run", str(run_id),
                before={"status": before["status"], "error": before["last_error"]},
                after={"status": "pending"},
            )  # fmt: skip
            retried.append(run_id)
    return retried


def retry_group(conn: Conn, fingerprint: str, *, actor: str, now: datetime | None = None) -> int:
    """Re-queue every open run of the group (at most MAX_RETRY_AT_ONCE); returns how many."""
    ids = [r["id"] for r in group_runs(conn, fingerprint, limit=MAX_RETRY_AT_ONCE)]
    if not ids:
        return 0
    with conn.transaction():
        counted = group_count(conn, fingerprint)
        retried = retry_runs(conn, ids, actor=actor, now=now)
        audit.record(
            conn, actor, "dead_letters.retry_group", "error_group", fingerprint,
            before={"runs": counted.runs, "in_history": counted.in_history},
            after={"retried": len(retried)},
        )  # fmt: skip
    return len(retried)


def retry_with_args(
    conn: Conn, run_id: int, args: Any, *, actor: str, now: datetime | None = None
) -> bool:
    """Re-queue one dead letter with new args (a JSON object); False when it is no longer
    a dead letter (someone retried it meanwhile)."""
    if not isinstance(args, dict):
        raise DeadLetterError('args must be a JSON object, like {"invoice": 42}', "args")
    with conn.transaction():
        before = get_run(conn, run_id)
        if before is None or before["status"] not in ("failed", "timed_out"):
            return False
        moved = moved_runs.refusal(conn, run_id, instead="re-run it from the runs page")
        if moved is not None:
            raise DeadLetterError(moved, "args")
        if transitions.retry(conn, run_id, args=args, now=now) is None:
            return False
        audit.record(
            conn, actor, "run.retry_with_args", "run", str(run_id),
            before={"status": before["status"], "args": before["args"]},
            after={"status": "pending", "args": args},
        )  # fmt: skip
    return True


@dataclass(frozen=True, slots=True)
class Resolution:
    id: int
    fingerprint: str
    action: str
    reason: str
    actor: str
    runs: int
    through: datetime
    at: datetime


def resolve_group(
    conn: Conn, fingerprint: str, action: str, reason: str, *, actor: str
) -> Resolution:
    """Mark a group resolved (fixed) or discarded (not worth retrying), saying why."""
    if action not in ACTIONS:
        raise DeadLetterError("choose resolved or discarded", "action")
    reason = reason.strip()
    if not reason:
        raise DeadLetterError("say why, so the next person on call knows", "reason")
    if len(reason) > MAX_REASON_CHARS:
        raise DeadLetterError(
            f"the reason is longer than {MAX_REASON_CHARS:,} characters", "reason"
        )
    with conn.transaction():
        row = conn.execute(_q("dead_letter_group_count"), {"fingerprint": fingerprint}).fetchone()
        if row is None or not row["runs"]:
            raise DeadLetterError("this group has no open dead letters any more", "action")
        params = {"fingerprint": fingerprint, "action": action, "reason": reason,
                  "actor": actor, "runs": row["runs"], "through": row["through"]}  # fmt: skip
        saved = conn.execute(_q("dead_letter_resolution_insert"), params).fetchone()
        assert saved is not None
        audit.record(
            conn, actor, AUDIT_ACTIONS[action],
            "error_group", fingerprint, before={"open_runs": row["runs"]},
            after={"action": action, "reason": reason, "through": row["through"]},
        )  # fmt: skip
    return Resolution(**saved)


def recent_resolutions(conn: Conn, limit: int = 20) -> list[Resolution]:
    rows = conn.execute(_q("dead_letter_resolutions_recent"), {"limit": limit}).fetchall()
    return [Resolution(**r) for r in rows]
