"""Exclusion calendars pages: list, create, show/edit, delete, blackout windows, and the
schedules that name a calendar — through `app.scheduling.calendars` (viewers see, editors
change)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db import Conn
from app.people.roles import Role
from app.scheduling import calendars, schedule_reads
from app.scheduling.calendars import CalendarError, CalendarSpec, WindowSpec
from app.scheduling.exclusions import Calendar, country_names, holidays_of
from app.scheduling.schedule_rules import db_now
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.render import redirect, render

CALENDAR_FIELDS = ("name", "country", "subdivision")
WINDOW_FIELDS = ("window_name", "starts_at", "ends_at", "timezone")
HOLIDAYS_SHOWN_DAYS = 366


def _url(name: str) -> str:
    return f"/calendars/{quote(name, safe='')}"


def upcoming_holidays(calendar: Calendar, today: date) -> list[tuple[date, str]]:
    """The calendar's holidays in the coming year, for people to check they are right."""
    if calendar.country is None:
        return []
    end = today + timedelta(days=HOLIDAYS_SHOWN_DAYS)
    found: list[tuple[date, str]] = []
    for year in range(today.year, end.year + 1):
        days = holidays_of(calendar.country, calendar.subdivision, year)
        found += [(d, n) for d, n in sorted(days.items()) if today <= d < end]
    return found


def _countries() -> list[tuple[str, str]]:
    """(code, name) of every country with holidays, by name."""
    return sorted(country_names().items(), key=lambda item: item[1])


def _index_page(conn: Conn) -> dict[str, Any]:
    return {"calendars": calendars.list_all(conn)}


def _show_page(conn: Conn, name: str) -> dict[str, Any]:
    try:
        row = calendars.get(conn, name)
    except CalendarError:
        raise HTTPException(404, f"There is no calendar named {name!r}.") from None
    calendar = Calendar(row["name"], row["country"], row["subdivision"])
    today = db_now(conn).date()
    used = set(row["schedules"])
    return {
        "calendar": row,
        "holidays": upcoming_holidays(calendar, today),
        "schedule_choices": [
            s["name"] for s in schedule_reads.list_schedules(conn) if s["name"] not in used
        ],
        "countries": _countries(),
    }


def _blank_window() -> dict[str, str]:
    return {f: "UTC" if f == "timezone" else "" for f in WINDOW_FIELDS}


def _values_of(row: dict[str, Any]) -> dict[str, str]:
    return {f: row[f] or "" for f in CALENDAR_FIELDS}


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    page = await call(request, _index_page)
    return render(request, "calendars/index.html", "calendars/_table.html", **page)


@requires(Role.EDITOR)
async def new(request: Request) -> Response:
    values = dict.fromkeys(CALENDAR_FIELDS, "")
    return render(request, "calendars/new.html", values=values, errors={}, countries=_countries())


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    page = await call(request, _show_page, request.path_params["name"])
    return render(
        request, "calendars/show.html", values=_values_of(page["calendar"]), errors={},
        window=_blank_window(), window_errors={}, editing=page["calendar"]["name"], **page,
    )  # fmt: skip


async def _form(request: Request, fields: tuple[str, ...]) -> dict[str, str]:
    form = await request.form()
    return {f: str(form.get(f, "")).strip() for f in fields}


async def _save(request: Request, name: str | None) -> Response:
    """Create (`name` None) or change a calendar; the form again with the error next to its
    field (422), nothing written."""
    values = await _form(request, CALENDAR_FIELDS)
    spec = CalendarSpec.model_construct(
        name=values["name"], country=values["country"], subdivision=values["subdivision"]
    )
    actor = current_user(request).username
    try:
        if name is None:
            saved = await call(request, calendars.create, spec, actor=actor)
        else:
            saved = await call(request, calendars.update, name, spec, actor=actor)
    except CalendarError as exc:
        errors = field_errors(exc)
        if name is None:
            return render(
                request, "calendars/new.html", "calendars/_form.html", status_code=422,
                values=values, errors=errors, countries=_countries(), editing=None,
            )  # fmt: skip
        page = await call(request, _show_page, name)
        return render(
            request, "calendars/show.html", "calendars/_form.html", status_code=422,
            values=values, errors=errors, window=_blank_window(), window_errors={},
            editing=name, **page,
        )  # fmt: skip
    return redirect(request, _url(saved))


@requires(Role.EDITOR)
async def create(request: Request) -> Response:
    return await _save(request, None)


@requires(Role.EDITOR)
async def update(request: Request) -> Response:
    return await _save(request, request.path_params["name"])


@requires(Role.EDITOR)
async def delete(request: Request) -> Response:
    name = request.path_params["name"]
    try:
        await call(request, calendars.delete, name, actor=current_user(request).username)
    except CalendarError as exc:
        raise HTTPException(404, str(exc)) from None
    return redirect(request, "/calendars")


@requires(Role.EDITOR)
async def add_window(request: Request) -> Response:
    name = request.path_params["name"]
    window = await _form(request, WINDOW_FIELDS)
    spec = WindowSpec(
        window["window_name"], window["starts_at"], window["ends_at"], window["timezone"]
    )
    try:
        await call(request, calendars.add_window, name, spec, actor=current_user(request).username)
    except CalendarError as exc:
        page = await call(request, _show_page, name)
        return render(
            request, "calendars/show.html", "calendars/_window_form.html", status_code=422,
            values=_values_of(page["calendar"]), errors={}, window=window,
            window_errors=field_errors(exc, whole_form="window_form"), editing=name, **page,
        )  # fmt: skip
    return _back_to_section(request, name, "windows")


def _back_to_section(request: Request, name: str, section: str) -> Response:
    """After a change made on the calendar's own page: back to that section of it. (htmx
    would not reload for a URL that differs only in its #fragment, so it refreshes.)"""
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=204, headers={"HX-Refresh": "true"})
    return redirect(request, f"{_url(name)}#{section}")


@requires(Role.EDITOR)
async def remove_window(request: Request) -> Response:
    name = request.path_params["name"]
    try:
        window_id = int(request.path_params["window_id"])
        actor = current_user(request).username
        await call(request, calendars.remove_window, name, window_id, actor=actor)
    except (ValueError, CalendarError) as exc:
        raise HTTPException(404, str(exc)) from None
    if request.headers.get("HX-Request") == "true":  # the row goes; the message says so
        message = "Blackout window removed: its days are no longer excluded."
        calendar = await call(request, calendars.get, name)
        return render(
            request, "calendars/_window_removed.html", calendar=calendar, message=message,
            kind="info",
        )  # fmt: skip
    return redirect(request, _url(name) + "#windows")


@requires(Role.EDITOR)
async def set_schedule(request: Request) -> Response:
    """Make a schedule name this calendar (`use` = yes) or stop naming it."""
    name = request.path_params["name"]
    form = await request.form()
    schedule = str(form.get("schedule", ""))
    calendar = name if form.get("use") == "yes" else None
    try:
        actor = current_user(request).username
        await call(request, calendars.assign, schedule, calendar, actor=actor)
    except CalendarError as exc:
        page = await call(request, _show_page, name)
        return render(
            request, "calendars/show.html", status_code=422,
            values=_values_of(page["calendar"]), errors={}, window=_blank_window(),
            window_errors={}, schedule_error=str(exc), editing=name, **page,
        )  # fmt: skip
    return redirect(request, _url(name) + "#schedules")


routes = [
    Route("/calendars", index, methods=["GET"], name="calendars_index"),
    Route("/calendars", create, methods=["POST"], name="calendars_create"),
    Route("/calendars/new", new, methods=["GET"], name="calendars_new"),
    Route(
        "/calendars/{name:path}/windows/{window_id}/delete",
        remove_window,
        methods=["POST"],
        name="calendars_window_delete",
    ),
    Route("/calendars/{name:path}/windows", add_window, methods=["POST"], name="calendars_window"),
    Route("/calendars/{name:path}/schedules", set_schedule, methods=["POST"], name="calendars_use"),
    Route("/calendars/{name:path}/delete", delete, methods=["POST"], name="calendars_delete"),
    Route("/calendars/{name:path}", show, methods=["GET"], name="calendars_show"),
    Route("/calendars/{name:path}", update, methods=["POST"], name="calendars_update"),
]
