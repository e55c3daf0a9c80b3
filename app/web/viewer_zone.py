"""The viewer's time zone: `?zone=` when given, else the one their browser reported (a
cookie set by `static/viewer-zone.js`), else UTC."""

from __future__ import annotations

from urllib.parse import unquote

from starlette.datastructures import FormData
from starlette.requests import Request

from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.zones import zone_named

ZONE_COOKIE = "sundial_zone"
DEFAULT_ZONE = "UTC"


def viewer_zone(request: Request) -> tuple[str, bool]:
    """(zone name, whether the viewer chose it) — an unknown name falls back to UTC."""
    for candidate, chosen in (
        (request.query_params.get("zone"), True),
        (unquote(request.cookies.get(ZONE_COOKIE, "")), True),
    ):
        if candidate:
            try:
                zone_named(candidate)
            except RecurrenceError:
                continue
            return candidate, chosen
    return DEFAULT_ZONE, False


def zone_of(request: Request, form: FormData | None = None) -> str:
    """The viewer's zone for a form post: its hidden `viewer_zone` field first."""
    wanted = str(form.get("viewer_zone", "")) if form is not None else ""
    if wanted:
        try:
            zone_named(wanted)
            return wanted
        except RecurrenceError:
            pass
    return viewer_zone(request)[0]
