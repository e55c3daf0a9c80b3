"""Circuit breakers and retry budgets per dependency: the services job definitions name as
called by their runs (`dependencies`, e.g. `payments-api`).

When the share of a dependency's calls that failed in its window crosses its threshold, its
breaker opens: the runs of the jobs calling it wait, pending, attempt unspent (the claims
pass them over, and a failure while it is not closed puts the run back for after the
cool-off). After the cool-off it goes half-open: `probes` trial runs go; their success
closes it, a failure opens it again. An operator can open or close it by hand (opened by
hand, it stays open until closed by hand). A retry budget holds retries back once they
reach a share of the recent first attempts. The reaper applies the rules
(`app.runs.breaker_rules`); every change is audited, by `sundial` or by the person.

    set_settings(conn, "payments-api", actor="alice", failure_threshold=0.5, min_calls=10)
    open_by_hand(conn, "payments-api", actor="alice", note="their status page says down")
    close_by_hand(conn, "payments-api", actor="alice")
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.core import limits
from app.core.db import Conn
from app.core.errors import Missing, UsageError, about
from app.core.sql import query
from app.people import audit
from app.runs.breaker_rules import BreakerState, Change, Seen, next_change, retries_held

SYSTEM_ACTOR = "sundial"  # the audit log's actor of the changes the rules make
MAX_WINDOW_SECONDS = 86400
MAX_PROBES = 1000
DEFAULTS: dict[str, Any] = {
    "failure_threshold": 0.5, "min_calls": 5, "window_seconds": 60, "cool_off_seconds": 30,
    "probes": 3, "retry_budget": None, "retry_window_seconds": 300,
}  # fmt: skip
SETTINGS = tuple(DEFAULTS)


class BreakerError(UsageError):
    """A breaker cannot be changed as asked; the message says why."""


class UnknownDependency(BreakerError, Missing):
    """No job names that service, and it has no breaker (the API answers 404)."""


class Breaker(BaseModel):
    """A dependency's circuit breaker as the pages, the API and the CLI show it."""

    name: str
    state: BreakerState = Field(description="closed: runs go; open: they wait; half_open: a "
                                "few trial runs go")  # fmt: skip
    state_since: datetime
    reopen_at: datetime | None = Field(description="When an open breaker lets trial runs go.")
    manual: bool = Field(description="Opened by hand: it stays open until closed by hand.")
    changed_by: str | None
    note: str | None = Field(description="Why it last changed, in words.")
    retries_held: bool = Field(description="Its retry budget is spent: retries wait.")
    failure_threshold: float
    min_calls: int
    window_seconds: int
    cool_off_seconds: int
    probes: int
    retry_budget: float | None
    retry_window_seconds: int
    calls: int = Field(description="Calls ended in its window.")
    failures: int = Field(description="Of those, how many failed.")
    retries: int = Field(description="Calls that were retries, in the retry window.")
    first_calls: int = Field(description="Calls that were first attempts, in the retry window.")


def check_name(name: str) -> str:
    with about("dependency"), limits.refused_as(BreakerError):
        return limits.check_name("a dependency's name", name)


def overview(conn: Conn, now: datetime | None = None) -> list[Breaker]:
    """Every dependency's breaker, by name."""
    return [Breaker.model_validate(row) for row in _seen_rows(conn, now)]


def _seen_rows(conn: Conn, now: datetime | None) -> list[dict[str, Any]]:
    return list(conn.execute(query("breakers", "breaker_seen"), {"now": now}))


def set_settings(
    conn: Conn, name: str, *, actor: str, now: datetime | None = None, **settings: Any
) -> None:
    """A dependency's breaker and retry-budget settings, replacing the ones it had (a
    setting left out takes its default, `DEFAULTS`); audited."""
    check_name(name)
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise BreakerError(f"unknown setting {sorted(unknown)[0]!r}", sorted(unknown)[0])
    after = {**DEFAULTS, **{k: v for k, v in settings.items() if v is not None}}
    _check_settings(after)
    with conn.transaction():
        before = conn.execute(query("breakers", "breaker_one"), {"name": name}).fetchone()
        conn.execute(query("breakers", "breaker_set"), {"name": name, "actor": actor,
                                                        "now": now, **after})  # fmt: skip
        audit.record(conn, actor, "dependency.settings", "dependency", name,
                     before=None if before is None else {k: before[k] for k in SETTINGS},
                     after=after, now=now)  # fmt: skip


def _check_settings(s: dict[str, Any]) -> None:
    with limits.refused_as(BreakerError):
        for field, label, low, high in (
            ("min_calls", "the fewest calls to judge by", 1, limits.MAX_COUNT),
            ("window_seconds", "the window in seconds", 1, MAX_WINDOW_SECONDS),
            ("cool_off_seconds", "the cool-off in seconds", 1, MAX_WINDOW_SECONDS),
            ("probes", "the trial runs", 1, MAX_PROBES),
            ("retry_window_seconds", "the retry window in seconds", 1, MAX_WINDOW_SECONDS),
        ):
            with about(field):
                s[field] = limits.check_whole(label, s[field], low, high)
        with about("failure_threshold"):
            s["failure_threshold"] = _share("the failure threshold", s["failure_threshold"])
            if s["failure_threshold"] == 0:
                raise limits.LimitError("the failure threshold must be above 0 (e.g. 0.5)")
        if s["retry_budget"] is not None:
            with about("retry_budget"):
                s["retry_budget"] = _share("the retry budget", s["retry_budget"])


def _share(label: str, value: Any) -> float:
    """A share from 0 to 1 (0.5: half)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise limits.LimitError(f"{label} must be a share from 0 to 1 (0.1: 10 %), got {value!r}")
    return float(value)


def open_by_hand(
    conn: Conn, name: str, *, actor: str, note: str | None = None, now: datetime | None = None
) -> None:
    """Open a dependency's breaker until someone closes it: its runs wait."""
    _by_hand(conn, name, BreakerState.OPEN, actor=actor, note=note, now=now)


def close_by_hand(
    conn: Conn, name: str, *, actor: str, note: str | None = None, now: datetime | None = None
) -> None:
    """Close a dependency's breaker: its runs go, and its window starts afresh."""
    _by_hand(conn, name, BreakerState.CLOSED, actor=actor, note=note, now=now)


def _by_hand(conn: Conn, name: str, to: BreakerState, *, actor: str, note: str | None,
             now: datetime | None) -> None:  # fmt: skip
    check_name(name)
    if note is not None:
        with about("note"), limits.refused_as(BreakerError):
            limits.check_text("the note", note)
    with conn.transaction():
        row = conn.execute(query("breakers", "breaker_one"), {"name": name}).fetchone()
        if row is None:
            raise UnknownDependency(f"no job names a dependency called {name!r}", "dependency")
        if row["state"] == to and row["manual"] == (to is BreakerState.OPEN):
            raise BreakerError(f"{name}'s breaker is already {to.value.replace('_', '-')}")
        words = note or ("opened by hand" if to is BreakerState.OPEN else "closed by hand")
        _change(conn, row, Change(to, words), actor=actor, manual=to is BreakerState.OPEN,
                now=now)  # fmt: skip


def _change(conn: Conn, row: dict[str, Any], change: Change, *, actor: str, manual: bool,
            now: datetime | None) -> bool:  # fmt: skip
    changed = conn.execute(
        query("breakers", "breaker_change"),
        {"name": row["name"], "from": row["state"], "to": change.to.value, "manual": manual,
         "actor": actor, "note": change.reason, "now": now},
    ).fetchone()  # fmt: skip
    if changed is None:
        return False  # another reaper changed it first
    audit.record(conn, actor, f"dependency.{change.to.value}", "dependency", row["name"],
                 before={"state": row["state"]},
                 after={"state": change.to.value, "reason": change.reason,
                        "reopen_at": _iso(changed["reopen_at"]),
                        "trial_runs": changed["probe_runs"]},
                 now=now)  # fmt: skip
    return True


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def evaluate(conn: Conn, now: datetime | None = None) -> list[tuple[str, Change]]:
    """Apply the breaker rules to every dependency (the reaper, each pass): the changes
    made, each audited by `sundial`."""
    made = []
    with conn.transaction():
        for row in _seen_rows(conn, now):
            seen = _seen(row)
            change = next_change(seen, row["clock"])
            if change is not None and _change(conn, row, change, actor=SYSTEM_ACTOR,
                                              manual=False, now=now):  # fmt: skip
                made.append((row["name"], change))
            held = retries_held(seen)
            if (
                held != row["retries_held"]
                and conn.execute(
                    query("breakers", "breaker_hold_retries"), {"name": row["name"], "held": held}
                ).fetchone()
            ):
                verb = "dependency.retries_held" if held else "dependency.retries_resumed"
                audit.record(conn, SYSTEM_ACTOR, verb, "dependency", row["name"],
                             after={"retries": seen.retries, "first_calls": seen.first_calls,
                                    "retry_budget": seen.retry_budget}, now=now)  # fmt: skip
        conn.execute(query("breakers", "breaker_prune_calls"), {"now": now})
    return made


def _seen(row: dict[str, Any]) -> Seen:
    return Seen(
        state=BreakerState(row["state"]), manual=row["manual"],
        failure_threshold=row["failure_threshold"], min_calls=row["min_calls"],
        reopen_at=row["reopen_at"], calls=row["calls"], failures=row["failures"],
        trials_left=row["trials_left"], retry_budget=row["retry_budget"],
        retries=row["retries"], first_calls=row["first_calls"],
    )  # fmt: skip
