"""Schedule lag as an SLO: a per-schedule threshold on the lag from a fire to the start of
its run, that lag broken down stage by stage, and two alerts.

Stages of a scheduled run (from the fire ledger, the run and its attempts):
    fire -> enqueue   the trigger recorded the fire and created its run (the ledger's
                      `recorded_at - fire_time`)
    enqueue -> claim  a worker first claimed it (the first attempt's start)
    claim -> start    the attempt that ran last started (time lost to retries)
    start -> finish   that attempt ran
The SLO's lag is fire -> first claim; a run not claimed yet counts with its lag so far.

Alerts:
- *lag over threshold*: a schedule's newest fire started (or is still waiting) later than
  its threshold;
- *dead man's switch*: an expected fire produced no run — the schedule's next fire is well
  past (the trigger is not firing; checked for every schedule), or, for schedules with a
  threshold, the rule says it should have fired at a time for which the fire ledger has
  no entry, or one saying it was missed while no trigger ran (coalesced or missed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import query
from app.people import audit
from app.scheduling.cron import Recurrence, fires_between, latest_fires
from app.scheduling.schedule_rules import db_now, recurrence_of

HOURS = 24
WATCHED_LIMIT = 500  # schedules with a threshold shown at once
OVERDUE_LIMIT = 50
GRACE_SECONDS = 60.0  # past a fire's time (and its spread) before it counts as missing
MISSING_SHOWN = 20  # expected fires listed per schedule
EXPECTED_CACHE_SIZE = 8192  # (schedule rule, minute) entries kept by `_expected_fires`
MINUTE = timedelta(minutes=1)

# The expected fires of a rule over whole minutes, computed once per minute: the page and
# its fragments refresh every few seconds, and walking a hundred rules each time cost
# most of the page. Safe across threads: entries are only added whole, or all dropped.
_expected_cache: dict[tuple[Recurrence, datetime, datetime], tuple[list[datetime], ...]] = {}


class SloError(UsageError):
    """Input a person can fix, with the form field it concerns."""


@dataclass(frozen=True, slots=True)
class Stage:
    label: str
    p50: float | None
    p95: float | None


@dataclass(frozen=True, slots=True)
class ScheduleLag:
    name: str
    threshold: int
    fires: int
    breaches: int
    latest_fire: datetime | None
    latest_lag: float | None
    lag_p50: float | None
    lag_p95: float | None
    stages: list[Stage]
    missing: list[datetime] = field(default_factory=list)

    @property
    def breached(self) -> bool:
        return self.latest_lag is not None and self.latest_lag > self.threshold


@dataclass(frozen=True, slots=True)
class Alert:
    kind: str  # "lag" or "missing"
    schedule: str
    text: str
    at: datetime | None


@dataclass(frozen=True, slots=True)
class Report:
    schedules: list[ScheduleLag]
    alerts: list[Alert]


def set_threshold(conn: Conn, schedule: str, seconds: int | None, *, actor: str) -> int | None:
    """Set (or, with None, clear) a schedule's lag threshold; audited."""
    if seconds is not None:
        with limits.refused_as(SloError):
            limits.check_whole("the lag threshold", seconds, 1, limits.MAX_DURATION_SECONDS)
    with conn.transaction():
        row = conn.execute(query("lag_slo", "slo_schedule_by_name"), {"name": schedule}).fetchone()
        if row is None:
            raise SloError(f"there is no schedule named {schedule!r}", "schedule")
        conn.execute(query("lag_slo", "slo_set_threshold"), {"id": row["id"], "seconds": seconds})
        audit.record(
            conn, actor, "schedule.lag_slo", "schedule", schedule,
            before={"lag_slo_seconds": row["lag_slo_seconds"]},
            after={"lag_slo_seconds": seconds}, subject_id=row["id"],
        )  # fmt: skip
    return seconds


def report(conn: Conn, *, now: datetime | None = None) -> Report:
    """Every watched schedule's breakdown, and the alerts that hold now."""
    params: dict[str, Any] = {"now": now, "hours": HOURS, "limit": WATCHED_LIMIT}
    rows = conn.execute(query("lag_slo", "slo_breakdown"), params).fetchall()
    moment = now or db_now(conn)
    missing = _missing_fires(conn, moment)
    schedules = [_lag(r, missing.get(r["name"], [])) for r in rows]
    alerts = [
        Alert(
            "lag",
            s.name,
            f"started {s.latest_lag:.0f} s after its fire; the threshold is {s.threshold} s",
            s.latest_fire,
        )
        for s in schedules
        if s.breached and s.latest_lag is not None
    ]
    overdue = _overdue(conn, now)
    alerts += [
        Alert(
            "missing",
            o["name"] or str(o["id"]),
            "was due to fire and has not: is the trigger running?",
            o["next_fire_time"],
        )
        for o in overdue
    ]
    said = {(a.schedule, a.at) for a in alerts}
    for s in schedules:
        alerts += [
            Alert("missing", s.name, "was expected to fire and that fire produced no run", at)
            for at in s.missing
            if (s.name, at) not in said  # the overdue alert already names that fire
        ]
    return Report(schedules, alerts)


def dead_man_firing(conn: Conn, *, now: datetime | None = None) -> int:
    """How many schedules the dead man's switch alerts for now: overdue (the trigger has
    not fired them) or with an expected fire their ledger does not account for — the
    "missing" alerts of `report`, counted by schedule, without the lag breakdown."""
    moment = now or db_now(conn)
    overdue = {o["name"] or str(o["id"]) for o in _overdue(conn, now)}
    return len(overdue | set(_missing_fires(conn, moment)))


def _overdue(conn: Conn, now: datetime | None) -> list[dict[str, Any]]:
    return conn.execute(
        query("lag_slo", "slo_overdue_schedules"),
        {"now": now, "grace": GRACE_SECONDS, "limit": OVERDUE_LIMIT},
    ).fetchall()


def _lag(row: dict[str, Any], missing: list[datetime]) -> ScheduleLag:
    stages = [
        Stage(label, row[f"{key}_p50"], row[f"{key}_p95"])
        for key, label in (
            ("enqueue", "fire → enqueue"),
            ("claim", "enqueue → claim"),
            ("start", "claim → start"),
            ("finish", "start → finish"),
        )
    ]
    return ScheduleLag(
        name=row["name"], threshold=row["lag_slo_seconds"], fires=row["fires"],
        breaches=row["breaches"], latest_fire=row["latest_fire"], latest_lag=row["latest_lag"],
        lag_p50=row["lag_p50"], lag_p95=row["lag_p95"], stages=stages, missing=missing,
    )  # fmt: skip


def _missing_fires(conn: Conn, now: datetime) -> dict[str, list[datetime]]:
    """For each watched schedule: the fires its rule expected in the last HOURS (up to the
    grace before now) that its ledger does not account for. One ledger read for all."""
    watched = conn.execute(query("lag_slo", "slo_schedules_watched"), {"limit": WATCHED_LIMIT})
    expected: dict[Any, tuple[str, list[datetime]]] = {}
    for row in watched.fetchall():
        spread = 0 if row["exact_minute"] else row["spread_seconds"]
        until = now - timedelta(seconds=GRACE_SECONDS + spread)
        since = max(now - timedelta(hours=HOURS), row["created_at"])
        if since < until:
            fires = _expected_fires(recurrence_of(row), since, until)
            if fires:
                expected[row["id"]] = (row["name"], fires)
    if not expected:
        return {}
    ledger = conn.execute(
        query("lag_slo", "slo_ledger_since"),
        {"ids": list(expected), "since": now - timedelta(hours=HOURS), "until": now},
    ).fetchall()
    recorded = {(r["schedule_id"], r["fire_time"]) for r in ledger}
    found: dict[str, list[datetime]] = {}
    for schedule_id, (name, times) in expected.items():
        gaps = [at for at in times if (schedule_id, at) not in recorded]
        if gaps:
            found[name] = gaps
    return found


def _expected_fires(rule: Recurrence, since: datetime, until: datetime) -> list[datetime]:
    """`latest_fires(rule, since, until, MISSING_SHOWN)`, from a per-minute cache: the
    newest fires of [since's minute, until's minute) and every fire of until's minute,
    cut to [since, until). The newest of a window that only grows on its older side
    include the newest of the window itself, so the cut is exact."""
    low = since.replace(second=0, microsecond=0)
    high = until.replace(second=0, microsecond=0)
    key = (rule, low, high)
    found = _expected_cache.get(key)
    if found is None:
        found = _slid_a_minute(rule, low, high) or (
            [f.at for f in latest_fires(rule, low, high, MISSING_SHOWN)],
            [f.at for f in fires_between(rule, high, high + MINUTE)],
        )
        if len(_expected_cache) >= EXPECTED_CACHE_SIZE:
            _expected_cache.clear()
        _expected_cache[key] = found
    older, tail = found
    fires = [at for at in older if at >= since] + [at for at in tail if at < until]
    return fires[-MISSING_SHOWN:]


def _slid_a_minute(
    rule: Recurrence, low: datetime, high: datetime
) -> tuple[list[datetime], list[datetime]] | None:
    """The cache entry of [low, high) from the one of the minute before, when there is one:
    the newest fires of the window moved on by a minute are the newest of what the old
    window's newest and its last minute hold from `low` on (exact: nothing older can be
    newer). Only the new last minute is walked, instead of the whole window."""
    before = _expected_cache.get((rule, low - MINUTE, high - MINUTE))
    if before is None:
        return None
    older, tail = before
    kept = [at for at in older if at >= low] + tail
    return kept[-MISSING_SHOWN:], [f.at for f in fires_between(rule, high, high + MINUTE)]
