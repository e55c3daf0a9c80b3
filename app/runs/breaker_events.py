"""What the circuit breakers of the services a run's job calls did during the run's life,
read from the audit log (`app.runs.breakers` audits every change) and told in words, so a
run's page can say why it waited.

    for event in events_of_run(conn, run_id):
        print(event.at, event.words)
        # 2026-12-04 10:31:58+00 payments-api paused after failures: 5 of its last 5 calls failed
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core.db import Conn
from app.core.sql import query
from app.runs.breakers import SYSTEM_ACTOR

MAX_EVENTS = 50  # the latest ones of a run's life; older ones stay in the audit log
ACTIONS = (
    "dependency.open", "dependency.half_open", "dependency.closed",
    "dependency.retries_held", "dependency.retries_resumed",
)  # fmt: skip
_DEFAULT_NOTES = frozenset({"opened by hand", "closed by hand"})  # no note was given


@dataclass(frozen=True, slots=True)
class BreakerEvent:
    at: datetime
    dependency: str
    state: str  # open, half_open or closed; for retries: retries_held or retries_resumed
    words: str
    actor: str = SYSTEM_ACTOR  # as the audit log names who made the change


def events_of_run(
    conn: Conn, run_id: int, now: datetime | None = None, limit: int = MAX_EVENTS
) -> list[BreakerEvent]:
    """The breaker changes of its job's services from the run's creation to its finish
    (or `now`), oldest first: the latest `limit` of them."""
    rows = conn.execute(
        query("breaker_events", "breaker_events_of_run"),
        {"id": run_id, "now": now, "actions": list(ACTIONS), "limit": limit},
    ).fetchall()
    return [_event(row) for row in reversed(rows)]


def _event(row: dict[str, Any]) -> BreakerEvent:
    state = row["action"].removeprefix("dependency.")
    return BreakerEvent(row["at"], row["dependency"], state, words(row), row["actor"])


def words(row: dict[str, Any]) -> str:
    """One audited breaker change in plain words."""
    name, actor, action = row["dependency"], row["actor"], row["action"]
    after = (row["details"] or {}).get("after") or {}
    reason = after.get("reason")
    by_hand = actor != SYSTEM_ACTOR
    note = f": {reason}" if reason and reason not in _DEFAULT_NOTES else ""
    if action == "dependency.open":
        if by_hand:
            return f"{name} paused by {actor}{note}; the runs that call it wait"
        return f"{name} paused after failures{note}"
    if action == "dependency.half_open":
        return f"{name}: its pause is over, a few trial runs go to see if it works again"
    if action == "dependency.closed":
        if by_hand:
            return f"{name} let through by {actor}{note}; the runs that call it go"
        return f"{name} working again{note}"
    if action == "dependency.retries_held":
        return (f"{name}: retries wait, its retry budget is spent ({after.get('retries')} "
                f"retries for {after.get('first_calls')} first calls lately)")  # fmt: skip
    return f"{name}: retries go again, its retry budget allows them"
