"""Exclusion calendars for people: create, change, delete, blackout windows, and which
calendar a schedule names — one set of rules for the dashboard (and any later CLI).

Bad input raises `CalendarError` with one sentence and the field it concerns; nothing is
written then. Every change is written to the audit log in the same transaction. The
trigger loads calendars with `load_many`; what a calendar excludes is `app.scheduling.exclusions`.

    with transaction(url) as conn:
        create(conn, CalendarSpec(name="Germany", country="DE"), actor="alice")
        add_window(conn, "Germany", WindowSpec("quarter close", start, end, "Europe/Berlin"),
                   actor="alice")
        assign(conn, "nightly", "Germany", actor="alice")
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import query
from app.people import audit
from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.exclusions import Blackout, Calendar, supported_countries
from app.scheduling.schedule_fields import CalendarFields
from app.scheduling.zones import zone_named


class CalendarError(UsageError):
    """A calendar cannot be changed as asked. `field` names the input at fault."""


class CalendarSpec(CalendarFields):
    """A calendar to create (its fields). The calendar page builds it without validation
    (`CalendarSpec.model_construct`): `normalized` checks it, refusing in a person's words
    and naming the field."""


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """A blackout window as a person enters it: local wall-clock times in `timezone`, as
    text like `2026-12-30T18:00` (what a browser's date-and-time field sends)."""

    name: str
    starts_at: str
    ends_at: str
    timezone: str = "UTC"


# ---- validation -----------------------------------------------------------------------------


def _check_name(value: str, label: str, field: str) -> str:
    name = value.strip()
    try:
        with limits.refused_as(CalendarError):
            limits.check_name(label, value, limits.MAX_NAME_LENGTH)
    except CalendarError as exc:
        raise CalendarError(str(exc), field) from None
    return name


def normalized(spec: CalendarSpec) -> CalendarSpec:
    """The spec with its name trimmed and the country and subdivision as the holidays
    library spells them; CalendarError for a country or subdivision it does not know."""
    name = _check_name(spec.name, "a calendar name", "name")
    country = (spec.country or "").strip().upper() or None
    subdivision = (spec.subdivision or "").strip() or None
    known = supported_countries()
    if country is None:
        if subdivision is not None:
            raise CalendarError("choose a country before a subdivision", "subdivision")
        return CalendarSpec.model_construct(name=name)
    if country not in known:
        raise CalendarError(
            f"{country!r} is not a country the holidays library knows; use a two-letter "
            f"code like DE, FR or US",
            "country",
        )
    if subdivision is not None:
        by_upper = {s.upper(): s for s in known[country]}
        if subdivision.upper() not in by_upper:
            choices = ", ".join(known[country][:12]) or "none"
            more = "…" if len(known[country]) > 12 else ""
            raise CalendarError(
                f"{country} has no subdivision {subdivision!r}; it has {choices}{more}",
                "subdivision",
            )
        subdivision = by_upper[subdivision.upper()]
    return CalendarSpec.model_construct(name=name, country=country, subdivision=subdivision)


def window_instants(spec: WindowSpec) -> tuple[datetime, datetime]:
    """The UTC start and end of a blackout window entered as local times in its zone."""
    _check_name(spec.name, "a window name", "window_name")
    try:
        zone = zone_named(spec.timezone.strip())
    except RecurrenceError as exc:
        raise CalendarError(str(exc), "timezone") from None
    instants = []
    for label, field, text in (
        ("the start", "starts_at", spec.starts_at),
        ("the end", "ends_at", spec.ends_at),
    ):
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            raise CalendarError(
                f"{label} is not a date and time; use 2026-12-30T18:00", field
            ) from None
        local = moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)
        try:
            with limits.refused_as(CalendarError):
                instants.append(limits.check_instant(label, local).astimezone(UTC))
        except CalendarError as exc:
            raise CalendarError(str(exc), field) from None
    start, end = instants
    if end <= start:
        raise CalendarError("the end of a blackout window must come after its start", "ends_at")
    return start, end


# ---- reads ----------------------------------------------------------------------------------


def list_all(conn: Conn) -> list[dict[str, Any]]:
    return conn.execute(query("calendars", "calendar_list")).fetchall()


def names(conn: Conn) -> list[str]:
    return [r["name"] for r in conn.execute(query("calendars", "calendar_names")).fetchall()]


def get(conn: Conn, name: str) -> dict[str, Any]:
    """One calendar with its windows and the names of the schedules that name it."""
    row = _find(conn, name, lock=False)
    params = {"calendar_id": row["id"]}
    windows = conn.execute(query("calendars", "calendar_windows"), params).fetchall()
    used_by = conn.execute(query("calendars", "calendar_schedules"), params).fetchall()
    return {**row, "windows": windows, "schedules": [r["name"] for r in used_by],
            "schedule_ids": [r["id"] for r in used_by]}  # fmt: skip


def calendar_named(conn: Conn, name: str) -> Calendar:
    """The calendar `name` as `app.scheduling.exclusions` checks fires against it (for a
    preview)."""
    row = get(conn, name)
    return _calendar(row, [(w["name"], w["starts_at"], w["ends_at"]) for w in row["windows"]])


def load_many(conn: Conn, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Calendar]:
    """The calendars with these ids, with their windows, in one statement."""
    rows = conn.execute(
        query("calendars", "calendar_load_many"), {"ids": sorted(set(ids))}
    ).fetchall()
    return {
        r["id"]: _calendar(
            r, zip(r["window_names"], r["window_starts"], r["window_ends"], strict=True)
        )
        for r in rows
    }


def _calendar(
    row: Mapping[str, Any], windows: Iterable[tuple[str, datetime, datetime]]
) -> Calendar:
    return Calendar(
        name=row["name"],
        country=row["country"],
        subdivision=row["subdivision"],
        blackouts=tuple(Blackout(n, s, e) for n, s, e in windows),
        id=row["id"],
    )


def _find(conn: Conn, name: str, *, lock: bool) -> dict[str, Any]:
    with limits.refused_as(CalendarError):
        limits.check_text("a calendar name", name, limits.MAX_NAME_LENGTH)
    statement = "calendar_lock_by_name" if lock else "calendar_by_name"
    row = conn.execute(query("calendars", statement), {"name": name}).fetchone()
    if row is None:
        raise CalendarError(f"there is no calendar named {name!r}")
    return row


def _snapshot(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("name", "country", "subdivision")}


# ---- changes --------------------------------------------------------------------------------


def create(conn: Conn, spec: CalendarSpec, *, actor: str, now: datetime | None = None) -> str:
    """A new calendar; returns its name as stored."""
    spec = normalized(spec)
    params = {**_spec_row(spec), "id": uuid.uuid4(), "now": now}
    with conn.transaction():
        if conn.execute(query("calendars", "calendar_insert"), params).fetchone() is None:
            raise CalendarError(f"a calendar named {spec.name!r} already exists", "name")
        after = _spec_row(spec)
        audit.record(conn, actor, "calendar.create", "calendar", spec.name, after=after)
    return spec.name


def _spec_row(spec: CalendarSpec) -> dict[str, Any]:
    return {"name": spec.name, "country": spec.country, "subdivision": spec.subdivision}


def update(
    conn: Conn, name: str, spec: CalendarSpec, *, actor: str, now: datetime | None = None
) -> str:
    """Change a calendar's name or holidays; returns its name as stored."""
    spec = normalized(spec)
    with conn.transaction():
        row = _find(conn, name, lock=True)
        if (
            spec.name != row["name"]
            and conn.execute(query("calendars", "calendar_by_name"), {"name": spec.name}).fetchone()
        ):
            raise CalendarError(f"a calendar named {spec.name!r} already exists", "name")
        before, after = _snapshot(row), _spec_row(spec)
        if before != after:
            conn.execute(
                query("calendars", "calendar_update"), {**after, "id": row["id"], "now": now}
            )
            audit.record(
                conn, actor, "calendar.update", "calendar", spec.name, before=before, after=after
            )
    return spec.name


def delete(conn: Conn, name: str, *, actor: str) -> None:
    """Delete a calendar and its windows; the schedules that named it name none (each
    schedule's change is audited too, so its versions say so)."""
    with conn.transaction():
        row = _find(conn, name, lock=True)
        details = get(conn, name)
        before = {
            **_snapshot(row),
            "windows": [_window_snapshot(w) for w in details["windows"]],
            "schedules": details["schedules"],
        }
        conn.execute(query("calendars", "calendar_delete"), {"id": row["id"]})
        audit.record(conn, actor, "calendar.delete", "calendar", row["name"], before=before)
        for schedule, schedule_id in zip(
            details["schedules"], details["schedule_ids"], strict=True
        ):
            audit.record(
                conn, actor, "schedule.calendar", "schedule", schedule,
                before={"calendar": row["name"]}, after={"calendar": None},
                subject_id=schedule_id,
            )  # fmt: skip


def _window_snapshot(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": row["name"],
        "starts_at": row["starts_at"].isoformat(),
        "ends_at": row["ends_at"].isoformat(),
        "timezone": row["timezone"],
    }


def add_window(
    conn: Conn, calendar: str, spec: WindowSpec, *, actor: str, now: datetime | None = None
) -> int:
    """Add a blackout window to `calendar`; returns its id."""
    start, end = window_instants(spec)
    row_values = {
        "name": spec.name.strip(),
        "starts_at": start,
        "ends_at": end,
        "timezone": spec.timezone.strip(),
    }
    with conn.transaction():
        row = _find(conn, calendar, lock=True)
        created = conn.execute(
            query("calendars", "window_insert"), {**row_values, "calendar_id": row["id"]}
        ).fetchone()
        assert created is not None
        conn.execute(query("calendars", "calendar_touch"), {"id": row["id"], "now": now})
        audit.record(
            conn, actor, "calendar.window.add", "calendar", row["name"],
            after=_window_snapshot(row_values),
        )  # fmt: skip
    return int(created["id"])


def remove_window(conn: Conn, calendar: str, window_id: int, *, actor: str) -> None:
    with conn.transaction():
        row = _find(conn, calendar, lock=True)
        params = {"id": window_id, "calendar_id": row["id"]}
        gone = conn.execute(query("calendars", "window_delete"), params).fetchone()
        if gone is None:
            raise CalendarError(f"calendar {row['name']!r} has no such blackout window")
        conn.execute(query("calendars", "calendar_touch"), {"id": row["id"], "now": None})
        audit.record(
            conn, actor, "calendar.window.remove", "calendar", row["name"],
            before=_window_snapshot(gone),
        )  # fmt: skip


def assign(
    conn: Conn,
    schedule: str,
    calendar: str | None,
    *,
    actor: str,
    now: datetime | None = None,
) -> None:
    """Make schedule `schedule` name the exclusion calendar `calendar` (None: no calendar).
    Applies from the next fire the trigger decides."""
    with conn.transaction():
        with limits.refused_as(CalendarError):
            limits.check_text("a schedule name", schedule, limits.MAX_NAME_LENGTH)
        row = conn.execute(
            query("calendars", "schedule_calendar_lock"), {"name": schedule}
        ).fetchone()
        if row is None:
            raise CalendarError(f"there is no schedule named {schedule!r}", "schedule")
        target = _find(conn, calendar, lock=False) if calendar is not None else None
        target_id = target["id"] if target else None
        if target_id == row["calendar_id"]:
            return
        conn.execute(
            query("calendars", "schedule_set_calendar"),
            {"id": row["id"], "calendar_id": target_id, "now": now},
        )
        audit.record(
            conn, actor, "schedule.calendar", "schedule", row["name"],
            before={"calendar": row["calendar_name"]},
            after={"calendar": target["name"] if target else None}, subject_id=row["id"],
        )  # fmt: skip
