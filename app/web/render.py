"""Templates: the Jinja environment, its filters, and `render`.

`render(request, page, fragment)` serves the whole page, or only `fragment` when htmx asks
(`HX-Request`), from one URL; `Vary: HX-Request` keeps caches from mixing them up. Asset
and page URLs are root-relative paths built from the route table, never from the Host
header. Autoescape is on: nothing a person or a job wrote is ever marked safe.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from jinja2 import pass_context
from jinja2.runtime import Context
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from app.core.resources import TEMPLATES_DIR
from app.people.roles import Role
from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.cron_words import cron_sentence
from app.scheduling.zones import zone_named
from app.web.security import CSRF_FIELD, request_csrf_token
from app.web.viewer_zone import DEFAULT_ZONE, viewer_zone

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
env = templates.env


def status_badge(status: str | None) -> Markup:
    """A run status as a coloured badge with its name in words."""
    text = str(status or "none")
    return Markup('<span class="badge status-{0}">{1}</span>').format(text, text.replace("_", " "))


def in_zone(moment: datetime | None, zone: str = DEFAULT_ZONE) -> str:
    """`2026-12-01 09:00 CET`: an instant as the clock on the wall of `zone` shows it."""
    if moment is None:
        return "—"
    try:
        local = moment.astimezone(zone_named(zone))
    except RecurrenceError:
        local = moment
    return local.strftime("%Y-%m-%d %H:%M %Z")


def in_zone_seconds(moment: datetime | None, zone: str = DEFAULT_ZONE) -> str:
    """`2026-12-01 09:00:05 CET`: `in_zone` to the second, for when a run started."""
    if moment is None:
        return "—"
    try:
        local = moment.astimezone(zone_named(zone))
    except RecurrenceError:
        local = moment
    return local.strftime("%Y-%m-%d %H:%M:%S %Z")


def progress_figure(value: float | None) -> str:
    """A progress report's number in plain figures: `40`, `12.5`, `1,234,567`."""
    if value is None:
        return "—"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def duration(seconds: float | int | None) -> str:
    """`45 s`, `5 min`, `2 h 30 min`, `3 d 4 h`."""
    if seconds is None:
        return "—"
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


def every(seconds: int | None) -> str:
    """An interval schedule's rule in words: `Every 15 min`."""
    return f"Every {duration(seconds)}" if seconds else ""


def path_part(value: str) -> str:
    """A name as one URL path segment (a `/` or `?` in a name stays part of it)."""
    return quote(value, safe="")


@pass_context
def _in_zone_filter(context: Context, moment: datetime | None, zone: str | None = None) -> str:
    """`in_zone` in templates: by default on the viewer's clock, so every page shows times
    on one clock, each named (`CET`, `EST`)."""
    return in_zone(moment, zone or context.get("viewer_zone") or DEFAULT_ZONE)


@pass_context
def _in_zone_seconds_filter(
    context: Context, moment: datetime | None, zone: str | None = None
) -> str:
    return in_zone_seconds(moment, zone or context.get("viewer_zone") or DEFAULT_ZONE)


env.filters.update(status_badge=status_badge, in_zone=_in_zone_filter, duration=duration)
env.filters.update(path_part=path_part, cron_sentence=cron_sentence, every=every)
env.filters.update(in_zone_seconds=_in_zone_seconds_filter, progress_figure=progress_figure)


def static(request: Request, path: str) -> str:
    return str(request.app.url_path_for("static", path=path))


def render(
    request: Request,
    page: str,
    fragment: str | None = None,
    *,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> Response:
    """The full page, or only `fragment` when htmx asks for it (one URL serves both)."""
    is_htmx = request.headers.get("HX-Request") == "true"
    template = fragment if (is_htmx and fragment) else page
    user = getattr(request.state, "user", None)
    if "viewer_zone" not in context:  # pages that show two clocks computed it already
        context["viewer_zone"] = viewer_zone(request)[0]
    context.update(
        user=user,
        roles=Role,
        csrf_field=CSRF_FIELD,
        csrf_token=request_csrf_token(request),
        static=lambda path: static(request, path),
        csrf_input=Markup('<input type="hidden" name="{0}" value="{1}">').format(
            CSRF_FIELD, request_csrf_token(request)
        ),
    )
    response = templates.TemplateResponse(
        request, template, context, status_code=status_code, headers=headers
    )
    response.headers["Vary"] = "HX-Request"
    return response


def redirect(request: Request, location: str) -> Response:
    """After a change: a 303 for a plain form, an `HX-Redirect` for htmx (which would
    otherwise follow the 303 itself and swap the next page into the form)."""
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=204, headers={"HX-Redirect": location})
    return RedirectResponse(location, status_code=303)
