"""Schedules pages: list and search, create and edit from presets with a live preview,
the schedule's page (pause, resume, run now, delete), its fire ledger and its versions.

Handlers parse the form, call one function of `app.scheduling.schedules` (the CLI's), and render.
Times are shown in the schedule's zone and in the viewer's (`viewer_zone`: the browser's
zone, sent by static/viewer-zone.js as a form field and a cookie; UTC until it has).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from urllib.parse import quote

from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.catalog import job_definitions, workflows
from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError, about
from app.core.limits import whole_id
from app.people import versions
from app.people.roles import Role
from app.people.versions import VersionError
from app.scheduling import (
    backfills,
    calendars,
    schedule_reads,
    schedule_rules,
    schedule_spec,
    schedules,
)
from app.scheduling.calendars import CalendarError
from app.scheduling.cron import Fire
from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.exclusions import excluded_reason
from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_presets import (
    DAYS,
    MINUTE_STEPS,
    PRESET_LABELS,
    Choice,
    PresetError,
    rule_of,
)
from app.scheduling.schedule_spec import ScheduleError, ScheduleSpec
from app.scheduling.zones import ClockChange, dst_note, iana_zone_names
from app.web import forecast
from app.web.access import current_user, requires
from app.web.database import call
from app.web.forms import field_errors
from app.web.history import entries as version_entries
from app.web.history import shown
from app.web.render import redirect, render
from app.web.schedule_form import (
    CHOICE_FIELDS,
    DEFAULTS,
    form_field,
    form_values,
    kept_on_edit,
    spec_of,
    values_of_row,
)
from app.web.viewer_zone import zone_of

ZONES = sorted(iana_zone_names())  # the zone field offers exactly what the rules accept
FLASHES = {
    "created": "Schedule created.", "saved": "Changes saved.", "paused": "Schedule paused.",
    "resumed": "Schedule resumed.", "not-paused": "The schedule was not paused.",
    "ran": "Started a run now.",
    "backfill-started": "Backfill started: its runs start in a moment, oldest first.",
    "backfill-cancelled": ("Backfill cancelled: its runs not started yet are cancelled, "
                           "running ones asked to stop."),
    "rolled-back": "Rolled back: the schedule fires as in that version again.",
    "unchanged": "Nothing changed: the schedule already was as in that version.",
}  # fmt: skip


def _url(name: str, suffix: str = "") -> str:
    return f"/schedules/{quote(name, safe='')}{suffix}"


# ---- pages ---------------------------------------------------------------------------------


def _choices(conn: Conn) -> dict[str, Any]:
    return {
        "jobs": job_definitions.choices(conn),
        "workflows": [w["name"] for w in workflows.list_all(conn)],
        "handlers": job_definitions.handler_choices(conn),
        "admin_only": job_definitions.DANGEROUS_HANDLERS,
        "zones": ZONES, "presets": PRESET_LABELS, "minute_steps": MINUTE_STEPS, "days": DAYS,
        "overlaps": [p.value for p in OverlapPolicy], "calendars": calendars.names(conn),
    }  # fmt: skip


def _schedule(conn: Conn, name: str) -> dict[str, Any]:
    try:
        row = schedule_reads.details(conn, name)
    except ScheduleError:
        raise HTTPException(404, f"There is no schedule named {name!r}.") from None
    row["next_fires"] = schedule_reads.next_fires(row)
    return row


def _form_page(conn: Conn, name: str | None) -> dict[str, Any]:
    page = _choices(conn)
    if name is not None:
        page["schedule"] = _schedule(conn, name)
    return page


FILTERS = ("name", "target", "state")


def _index_page(conn: Conn, params: QueryParams) -> dict[str, Any]:
    paused = {"paused": True, "active": False}.get(params.get("state", ""))
    after = params.get("after") or None
    page = schedule_reads.search(conn, params.get("name") or None, params.get("target") or None,
                            paused, after)  # fmt: skip
    kept = {k: v for k in FILTERS if (v := params.get(k))}
    return {"schedules": page.rows, **page.links("/schedules", kept, after)}


@requires(Role.VIEWER)
async def index(request: Request) -> Response:
    params = request.query_params
    page = await call(request, _index_page, params)
    return render(request, "schedules/index.html", "schedules/_table.html", filters=params,
                  viewer_zone=zone_of(request), **page)  # fmt: skip


@requires(Role.EDITOR)
async def new(request: Request) -> Response:
    page = await call(request, _form_page, None)
    # A new schedule starts on the viewer's clock.
    values = {**DEFAULTS, "name": "", "days": ["1"], "cron": "", "exact_minute": False,
              "auto_pause_after": "", "job": "", "workflow": "",
              "timezone": zone_of(request)}  # fmt: skip
    return render(request, "schedules/new.html", values=values, errors={}, editing=None,
                  viewer_zone=zone_of(request), **page)  # fmt: skip


def _preview(conn: Conn, values: dict[str, Any], editing: str | None) -> dict[str, Any]:
    """What the preview shows for the form as typed: the rule, the next fires, or the
    error next to its field."""
    anchor = None
    if editing is not None:
        stored = _schedule(conn, editing)
        values = {**values, **kept_on_edit(stored)}
        anchor = stored["created_at"]
    # The preview is about when it runs: a name or job not chosen yet is for the save.
    values = {**values, "name": values["name"] or "preview", "job": values["job"] or "-",
              "workflow": values["workflow"] or "-", "handler": values["handler"] or "-",
              "target_kind": "job"}  # fmt: skip
    try:
        spec = spec_of(values)
    except UsageError as exc:
        return {"errors": field_errors(exc, lambda field: form_field(field, values))}
    try:
        fires, warnings = schedule_reads.preview(spec, schedule_rules.db_now(conn), anchor=anchor)
        chosen = values["calendar"]
        calendar = calendars.calendar_named(conn, chosen) if chosen else None
    except ScheduleError as exc:
        return {"errors": field_errors(exc, lambda field: form_field(field, values))}
    except CalendarError as exc:
        return {"errors": {"calendar": str(exc)}}
    # Fires the calendar excludes are shown crossed out, with the reason.
    excluded = [excluded_reason(calendar, fire.at, spec.timezone) for fire in fires]
    ahead = schedule_reads.clock_change_ahead(spec, schedule_rules.db_now(conn), anchor)
    return {"errors": {}, "spec": spec, "fires": fires, "warnings": warnings, "excluded": excluded,
            "clock_change": clock_change_words(spec, ahead)}  # fmt: skip


def _forecast(
    conn: Conn, values: dict[str, Any], editing: str | None, zone: str
) -> dict[str, Any] | None:
    """The load forecast with the rule the form's preset stands for; None while the rule
    is not usable (the preview says why, next to the field)."""
    choice = Choice(**{f: values[f] for f in CHOICE_FIELDS}, days=tuple(values["days"]))
    try:
        rule = rule_of(choice)
        params = {"cron": rule.cron or "", "every_seconds": str(rule.every_seconds or ""),
                  "timezone": values["timezone"], "name": editing or ""}  # fmt: skip
        return forecast.fragment_page(conn, params, zone)
    except (PresetError, RecurrenceError):
        return None


@requires(Role.EDITOR)
async def forecast_fragment(request: Request) -> Response:
    """The 24-hour load forecast the editor embeds, for the form as typed."""
    form = await request.form()
    editing = str(form.get("editing", "")) or None
    zone = zone_of(request, form)
    page = await call(request, _forecast, form_values(form), editing, zone)
    if page is None:
        return render(request, "forecast/_fragment_waiting.html")
    return render(request, "forecast/_fragment.html", zone=zone, **page)


@requires(Role.EDITOR)
async def preview(request: Request) -> Response:
    form = await request.form()
    values = form_values(form)
    editing = str(form.get("editing", "")) or None
    shown = await call(request, _preview, values, editing)
    return render(request, "schedules/_preview.html", values=values, editing=editing,
                  viewer_zone=zone_of(request, form), dst_note=dst_note, **shown)  # fmt: skip


async def _save(request: Request, name: str | None) -> Response:
    """Create (`name` None) or update; the form again (422) with the error by its field."""
    form = await request.form()
    values = form_values(form)
    user = current_user(request)
    actor, admin = user.username, user.may(Role.ADMIN)
    page = await call(request, _form_page, name)
    if name is not None:
        values.update(kept_on_edit(page["schedule"]))
    try:
        spec = spec_of(values)
        if spec.handler in job_definitions.DANGEROUS_HANDLERS and not admin:
            raise UsageError(
                f"only an admin may schedule a job that runs {spec.handler!r}", "handler"
            )
        await call(request, _write, spec, name, values["calendar"] or None, actor)
    except CalendarError as exc:  # the calendar the schedule names, whatever its own field
        errors = {"calendar": str(exc)}
    except UsageError as exc:
        errors = field_errors(exc, lambda field: form_field(field, values))
    else:
        done = "created" if name is None else "saved"
        return redirect(request, _url(spec.name, f"?done={done}"))
    return render(
        request, "schedules/new.html" if name is None else "schedules/edit.html",
        "schedules/_form.html", status_code=422, values=values, errors=errors,
        editing=name, viewer_zone=zone_of(request, form), **page,
    )  # fmt: skip


def _write(
    conn: Conn, spec: ScheduleSpec, name: str | None, calendar: str | None, actor: str
) -> None:
    """Create (`name` None) or update the schedule and name its calendar, all or nothing."""
    with conn.transaction():
        if name is None:
            schedules.create_schedule(conn, spec, actor=actor)
            calendars.assign(conn, spec.name, calendar, actor=actor)
        else:  # one change, one version: the calendar with the rest
            changes = {f: getattr(spec, f) for f in schedule_spec.EDITABLE}
            changes[schedule_spec.CALENDAR] = calendar
            schedules.update_schedule(conn, name, changes, actor=actor)


@requires(Role.EDITOR)
async def create(request: Request) -> Response:
    return await _save(request, None)


@requires(Role.EDITOR)
async def edit(request: Request) -> Response:
    name = request.path_params["name"]
    page = await call(request, _form_page, name)
    return render(request, "schedules/edit.html", values=values_of_row(page["schedule"]),
                  errors={}, editing=name, viewer_zone=zone_of(request), **page)  # fmt: skip


@requires(Role.EDITOR)
async def update(request: Request) -> Response:
    return await _save(request, request.path_params["name"])


def _show_page(conn: Conn, name: str) -> dict[str, Any]:
    schedule = _schedule(conn, name)
    return {"schedule": schedule, "backfills": backfills.listed(conn, schedule_id=schedule["id"])}


async def _show(request: Request, status_code: int = 200, **extra: Any) -> Response:
    name = request.path_params["name"]
    page = await call(request, _show_page, name)
    done = FLASHES.get(request.query_params.get("done", ""))
    return render(request, "schedules/show.html", status_code=status_code, done=done,
                  started=_started_link(request), viewer_zone=zone_of(request),
                  url=_url(name), max_backfill_at_once=limits.MAX_BACKFILL_CONCURRENCY,
                  **{"errors": {}, **page, **extra})  # fmt: skip


@requires(Role.VIEWER)
async def last_run(request: Request) -> Response:
    """The "Last run" line alone: the page fetches it again whenever runs change."""
    page = await call(request, _show_page, request.path_params["name"])
    return render(request, "schedules/_last_run.html", **page)


def _started_link(request: Request) -> tuple[str, str] | None:
    """(address, words) of what "Run now" just started, from the redirect's query string;
    None for anything else there (it is only ever a link, never trusted further)."""
    run_id = request.query_params.get("run", "")
    if run_id.isascii() and run_id.isdigit() and len(run_id) <= 19:
        return f"/runs/{int(run_id)}", f"run {int(run_id)}"
    try:
        dag_run = uuid.UUID(request.query_params.get("dag_run", ""))
    except ValueError:
        return None
    return f"/dag-runs/{dag_run}", "its DAG run"


@requires(Role.VIEWER)
async def show(request: Request) -> Response:
    return await _show(request)


def _pause(conn: Conn, name: str, note: str, until_text: str, actor: str) -> None:
    until = None
    if until_text:
        with about("until"):
            until = schedule_spec.parse_when(
                until_text, schedule_reads.zone_of(conn, name), schedule_rules.db_now(conn)
            )
    schedules.pause(conn, name, note=note or None, until=until, actor=actor)


@requires(Role.OPERATOR)
async def pause(request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    note, until = str(form.get("note", "")).strip(), str(form.get("until", "")).strip()
    try:
        await call(request, _pause, name, note, until, current_user(request).username)
    except ScheduleError as exc:
        return await _show(
            request, 422, errors=field_errors(exc, whole_form="note"),
            pause_values={"note": note, "until": until},
        )  # fmt: skip
    return redirect(request, _url(name, "?done=paused"))


@requires(Role.OPERATOR)
async def resume(request: Request) -> Response:
    name = request.path_params["name"]
    try:
        resumed = await call(request, schedules.resume, name, actor=current_user(request).username)
    except ScheduleError as exc:
        raise HTTPException(404, str(exc)) from None
    return redirect(request, _url(name, "?done=" + ("resumed" if resumed else "not-paused")))


@requires(Role.OPERATOR)
async def run_now(request: Request) -> Response:
    name = request.path_params["name"]
    try:
        started = await call(request, schedules.run_now, name, actor=current_user(request).username)
    except ScheduleError as exc:
        return await _show(request, 409, errors={"run": str(exc)})
    if started.dag_run_id is not None:
        return redirect(request, _url(name, f"?done=ran&dag_run={started.dag_run_id}"))
    return redirect(request, _url(name, f"?done=ran&run={started.run_id}"))


@requires(Role.EDITOR)
async def delete(request: Request) -> Response:
    name = request.path_params["name"]
    if (await request.form()).get("confirm") != "yes":
        return await _show(
            request, 422, errors={"confirm": "Tick the box to confirm the deletion."}
        )
    try:
        await call(request, schedules.delete, name, actor=current_user(request).username)
    except ScheduleError as exc:
        raise HTTPException(404, str(exc)) from None
    return redirect(request, "/schedules")


def _fires_page(conn: Conn, name: str, before: datetime | None) -> dict[str, Any]:
    schedule = _schedule(conn, name)
    rows = schedule_reads.fire_page(conn, schedule["id"], before, schedule_reads.FIRE_PAGE_SIZE + 1)
    more = len(rows) > schedule_reads.FIRE_PAGE_SIZE
    rows = rows[: schedule_reads.FIRE_PAGE_SIZE]
    return {"schedule": schedule, "fires": rows, "older": rows[-1]["fire_time"] if more else None}


@requires(Role.VIEWER)
async def fires(request: Request) -> Response:
    name = request.path_params["name"]
    before_text = request.query_params.get("before", "")
    try:
        before = datetime.fromisoformat(before_text) if before_text else None
    except ValueError:
        raise HTTPException(400, "The page link is broken: start from the newest fires.") from None
    if before is not None and before.tzinfo is None:
        raise HTTPException(400, "The page link is broken: start from the newest fires.")
    page = await call(request, _fires_page, name, before)
    return render(request, "schedules/fires.html", "schedules/_fires.html",
                  viewer_zone=zone_of(request), first_page=before is None, dst_note=dst_note,
                  **page)  # fmt: skip


def _history_page(conn: Conn, name: str) -> dict[str, Any]:
    return {"schedule": _schedule(conn, name),
            "entries": version_entries(conn, "schedule", name)}  # fmt: skip


@requires(Role.VIEWER)
async def history(request: Request) -> Response:
    name = request.path_params["name"]
    page = await call(request, _history_page, name)
    return render(request, "schedules/history.html", viewer_zone=zone_of(request),
                  error=None, shown=shown, **page)  # fmt: skip


def _rollback(conn: Conn, name: str, version_id: int, actor: str) -> bool:
    """Roll back; False when the schedule already was as in that version."""
    before = versions.history(conn, "schedule", name)
    versions.rollback(conn, "schedule", name, version_id, actor=actor)
    return versions.history(conn, "schedule", name)[0].id != before[0].id


@requires(Role.EDITOR)
async def rollback(request: Request) -> Response:
    name = request.path_params["name"]
    version = str((await request.form()).get("version", ""))
    try:
        changed = await call(request, _rollback, name, whole_id(version) or -1,
                             current_user(request).username)  # fmt: skip
    except (VersionError, ScheduleError) as exc:
        page = await call(request, _history_page, name)
        return render(request, "schedules/history.html", status_code=422, error=str(exc),
                      viewer_zone=zone_of(request), shown=shown, **page)  # fmt: skip
    return redirect(request, _url(name, "?done=" + ("rolled-back" if changed else "unchanged")))


def clock_change_words(spec: ScheduleSpec, ahead: tuple[ClockChange, list[Fire]] | None) -> str:
    """The next clock change in the schedule's zone and what it does to this schedule, in
    words (shown even when it is past the fires listed); empty for a zone without one."""
    if ahead is None:
        return ""
    change, near = ahead
    jump = "forward" if change.forward else "back"
    words = (f"On {change.before:%a %-d %b %Y} at {change.before:%H:%M} the clocks in "
             f"{spec.timezone} go {jump} to {change.after:%H:%M}.")  # fmt: skip
    if spec.every_seconds is not None:
        return words + (" Runs keep their spacing in elapsed time, so after it their clock "
                        "times are shifted.")  # fmt: skip
    notes = list(dict.fromkeys(n for f in near if (n := dst_note(f.at, f.local, spec.timezone))))
    if not notes:
        return words + " It does not move this schedule's times."
    return words + " For this schedule: " + "; ".join(notes) + "."


routes = [
    Route("/schedules", index, methods=["GET"], name="schedules_index"),
    Route("/schedules", create, methods=["POST"], name="schedules_create"),
    Route("/schedules/new", new, methods=["GET"], name="schedules_new"),
    Route("/schedules/preview", preview, methods=["POST"], name="schedules_preview"),
    Route("/schedules/forecast", forecast_fragment, methods=["POST"], name="schedules_forecast"),
    Route("/schedules/{name:path}/edit", edit, methods=["GET"], name="schedules_edit"),
    Route("/schedules/{name:path}/last-run", last_run, methods=["GET"], name="schedules_last_run"),
    Route("/schedules/{name:path}/edit", update, methods=["POST"], name="schedules_update"),
    Route("/schedules/{name:path}/pause", pause, methods=["POST"], name="schedules_pause"),
    Route("/schedules/{name:path}/resume", resume, methods=["POST"], name="schedules_resume"),
    Route("/schedules/{name:path}/run", run_now, methods=["POST"], name="schedules_run"),
    Route("/schedules/{name:path}/delete", delete, methods=["POST"], name="schedules_delete"),
    Route("/schedules/{name:path}/fires", fires, methods=["GET"], name="schedules_fires"),
    Route("/schedules/{name:path}/history", history, methods=["GET"], name="schedules_history"),
    Route("/schedules/{name:path}/rollback", rollback, methods=["POST"], name="schedules_rollback"),
    Route("/schedules/{name:path}", show, methods=["GET"], name="schedules_show"),
]
