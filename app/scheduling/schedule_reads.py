"""Reading schedules for people: the list and its search, one schedule's details, its fire
ledger, the preview of its next fires and the next clock change ahead of it.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from app.core import limits
from app.core.db import Conn
from app.core.name_pages import NamePage, page_by_name
from app.core.sql import like_literal, query
from app.scheduling.cron import EPSILON, Fire, fires_after
from app.scheduling.schedule_rules import recurrence_of
from app.scheduling.schedule_spec import (
    MAX_NAME_LENGTH,
    ScheduleError,
    ScheduleSpec,
    never_fires,
    schedule_row,
    validate_fields,
)
from app.scheduling.zones import ClockChange, next_clock_change, zone_named

DEFAULT_FIRES_SHOWN = 50


def find(conn: Conn, name: str) -> dict[str, Any]:
    with limits.refused_as(ScheduleError):
        limits.check_text("a schedule name", name, MAX_NAME_LENGTH)
    row = conn.execute(query("schedules", "schedule_by_name"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleError(f"there is no schedule named {name!r}")
    return row


def list_schedules(conn: Conn) -> list[dict[str, Any]]:
    return conn.execute(query("schedules", "schedule_list")).fetchall()


def zone_of(conn: Conn, name: str) -> str:
    """The time zone of schedule `name`."""
    return str(find(conn, name)["timezone"])


def list_fires(conn: Conn, name: str, limit: int = DEFAULT_FIRES_SHOWN) -> list[dict[str, Any]]:
    with limits.refused_as(ScheduleError):
        limits.check_whole("the number of fires shown", limit, 1, limits.MAX_FIRES_SHOWN)
    row = find(conn, name)
    return conn.execute(
        query("schedules", "fire_list"), {"id": row["id"], "limit": limit}
    ).fetchall()


PREVIEW_FIRES = 10


FIRE_PAGE_SIZE = 50


def preview(
    spec: ScheduleSpec, now: datetime, count: int = PREVIEW_FIRES, anchor: datetime | None = None
) -> tuple[list[Fire], list[str]]:
    """The next `count` fires of `spec`'s rule after `now`, validated as `create_schedule`
    would (its target aside), and its warnings; ScheduleError for a rule that never fires.
    An interval counts from `anchor` (the schedule's creation; `now` for a new one)."""
    warnings = validate_fields(spec)
    rule = recurrence_of(schedule_row(spec, anchor or now))
    fires = list(itertools.islice(fires_after(rule, now), count))
    if not fires:
        raise never_fires(spec, rule, now)
    return fires, warnings


MAX_FIRES_NEAR_A_CHANGE = 400  # an every-minute rule makes 360 in the six hours around one


def clock_change_ahead(
    spec: ScheduleSpec, now: datetime, anchor: datetime | None = None
) -> tuple[ClockChange, list[Fire]] | None:
    """The next clock change in `spec`'s zone (within about a year), with the rule's fires
    from three hours before it to three after (the only ones it can move); None where the
    zone has none."""
    change = next_clock_change(zone_named(spec.timezone), now)
    if change is None:
        return None
    rule = recurrence_of(schedule_row(spec, anchor or now))
    near = fires_after(rule, max(now, change.at - timedelta(hours=3)))
    until = change.at + timedelta(hours=3)
    fires = itertools.takewhile(lambda f: f.at < until, near)
    return change, list(itertools.islice(fires, MAX_FIRES_NEAR_A_CHANGE))


def details(conn: Conn, name: str) -> dict[str, Any]:
    """Schedule `name` for its page: the row, what it runs, its last run and ledger size."""
    row = conn.execute(query("schedules", "schedule_by_name_full"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleError(f"there is no schedule named {name!r}")
    params = {"id": row["id"]}
    row["last_run"] = conn.execute(query("schedules", "schedule_last_run"), params).fetchone()
    fires = conn.execute(query("schedules", "fire_count"), params).fetchone()
    row["fire_count"] = fires["fires"] if fires else 0
    return row


def next_fires(row: Mapping[str, Any], count: int = PREVIEW_FIRES) -> list[Fire]:
    """A stored schedule's next `count` intended fires, from its next fire on."""
    if row["next_fire_time"] is None:
        return []
    rule = recurrence_of(row)
    return list(itertools.islice(fires_after(rule, row["next_fire_time"] - EPSILON), count))


LIST_PAGE = 100  # schedules listed on one page


def search(
    conn: Conn,
    name: str | None,
    target: str | None,
    paused: bool | None,
    after: str | None = None,
    limit: int | None = None,
) -> NamePage:
    """One page of the schedules whose name / job or workflow name contain the words given,
    paused or not, by name, after the name `after` (None: the first page)."""
    return page_by_name(
        conn,
        query("schedules", "schedule_search"),
        query("schedules", "schedule_search_count"),
        {"name": _like(name), "target": _like(target), "paused": paused},
        after,
        limit or LIST_PAGE,
    )


def _like(text: str | None) -> str | None:
    """`text` as a literal ILIKE fragment (its % and _ match themselves)."""
    return like_literal(text) if text else None


def fire_page(
    conn: Conn, schedule_id: uuid.UUID, before: datetime | None, limit: int = FIRE_PAGE_SIZE
) -> list[dict[str, Any]]:
    """Up to `limit` ledger rows of a schedule older than `before` (None: the newest)."""
    params = {"id": schedule_id, "before": before, "limit": limit}
    return conn.execute(query("schedules", "fire_page"), params).fetchall()
