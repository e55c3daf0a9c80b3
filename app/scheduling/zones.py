"""Time zones, pure: the IANA names Sundial accepts, a zone found by its city, and the next
clock change of a zone (for the preview's warning). A zone that is not in the tz database
is refused with a sentence, never silently read as UTC.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from importlib.resources import files
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.scheduling.cron_expressions import RecurrenceError


@lru_cache(maxsize=1)
def iana_zone_names() -> frozenset[str]:
    """The names the IANA tz database lists as zones (links such as US/Eastern included),
    as the tzdata package records them: not the files and folders beside them in a system's
    zoneinfo folder (`posix/...`, `right/...`, `localtime`, `zone.tab`)."""
    return frozenset(files("tzdata").joinpath("zones").read_text().split()) - {"Factory"}


# The regions of the tz database's own zone names (not the old aliases like US/Eastern).
_REGIONS = ("Africa/", "America/", "Antarctica/", "Asia/", "Atlantic/", "Australia/", "Europe/",
            "Indian/", "Pacific/")  # fmt: skip


@lru_cache(maxsize=1)
def _zones_by_city() -> dict[str, list[str]]:
    """Zone names by their city (and by the whole name), compared without case."""
    by_city: dict[str, list[str]] = {}
    for name in sorted(iana_zone_names()):
        by_city.setdefault(_city_key(name), []).append(name)
        if name.startswith(_REGIONS):
            by_city.setdefault(_city_key(name.rsplit("/", 1)[-1]), []).append(name)
    return by_city


def _city_key(text: str) -> str:
    return " ".join(text.replace("_", " ").split()).casefold()


def zone_by_city(text: str) -> str:
    """What a person typed in a time zone field: a zone's name as is, or the one zone whose
    city it names ("berlin", "New York" -> "America/New_York"); else `text` unchanged, for
    `zone_named` to refuse with its sentence. Forms only: the API takes exact names."""
    if text in iana_zone_names() or len(text) > 100:
        return text
    found = _zones_by_city().get(_city_key(text), [])
    return found[0] if len(found) == 1 else text


@lru_cache(maxsize=1024)
def zone_named(name: str) -> ZoneInfo:
    """The IANA time zone `name`; RecurrenceError for any other (never silently UTC)."""
    if name not in iana_zone_names():
        shown = name if len(name) <= 60 else name[:60] + "…"
        raise RecurrenceError(
            f"unknown time zone {shown!r}; use an IANA name like Europe/Berlin or UTC"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise RecurrenceError(
            f"unknown time zone {name!r}; use an IANA name like Europe/Berlin or UTC"
        ) from None


class ClockChange(NamedTuple):
    """A change of a zone's UTC offset: at the UTC instant `at`, local clocks showing
    `before` (naive) turn to `after`."""

    at: datetime
    before: datetime
    after: datetime

    @property
    def forward(self) -> bool:
        return self.after > self.before


def next_clock_change(zone: ZoneInfo, now: datetime, days: int = 400) -> ClockChange | None:
    """The zone's first offset change after `now` within `days`; None for a zone without
    one (UTC, most of Asia). Day by day, then to the second."""
    start = now.astimezone(UTC).replace(microsecond=0)
    offset = start.astimezone(zone).utcoffset()
    for day in range(1, days + 1):
        probe = start + timedelta(days=day)
        if probe.astimezone(zone).utcoffset() != offset:
            low, high = probe - timedelta(days=1), probe
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                if middle.astimezone(zone).utcoffset() == offset:
                    low = middle
                else:
                    high = middle
            at = high.replace(microsecond=0)
            after = at.astimezone(zone)
            before = (at - timedelta(seconds=1)).astimezone(zone) + timedelta(seconds=1)
            return ClockChange(at, before.replace(tzinfo=None), after.replace(tzinfo=None))
    return None


@lru_cache(maxsize=8192)
def near_transition(zone: ZoneInfo, day: date) -> bool:
    """Whether the UTC offset changes between the day before `day` and the day after: only
    then can a local time on `day` be skipped or repeated."""
    probes = (day + timedelta(days=d) for d in (-1, 0, 1, 2))
    return len({zone.utcoffset(datetime.combine(probe, time())) for probe in probes}) > 1


def utc_offset(aware: datetime) -> timedelta:
    offset = aware.utcoffset()
    assert offset is not None, "an aware datetime has an offset"
    return offset


@lru_cache(maxsize=1024)
def clock_jump(zone: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The UTC instant of the forward transition between the naive UTC times `low` (before
    it) and `high` (after it), to the second."""
    before = low.replace(tzinfo=UTC).astimezone(zone).utcoffset()
    lo, hi = int(low.replace(tzinfo=UTC).timestamp()), int(high.replace(tzinfo=UTC).timestamp())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return datetime.fromtimestamp(hi, UTC)


def dst_note(at: datetime, local: datetime, zone: str) -> str:
    """Why a fire's clock time looks odd, in words; empty when nothing odd happened.

    `local` is the wall time the fire was meant for, `at` the instant it fired."""
    try:
        tz = zone_named(zone)
    except RecurrenceError:
        return ""
    wall = at.astimezone(tz)
    meant = local.replace(tzinfo=None, second=0, microsecond=0)
    if wall.replace(tzinfo=None, second=0, microsecond=0) != meant:
        return (f"{meant:%H:%M} does not exist on {meant:%-d %b} (the clocks jump forward); "
                f"runs at {wall:%H:%M}")  # fmt: skip
    if tz.utcoffset(meant.replace(fold=0)) != tz.utcoffset(meant.replace(fold=1)):
        which = "second" if wall.fold else "first"
        return (f"{meant:%H:%M} happens twice on {meant:%-d %b} (the clocks go back); "
                f"this is the {which} time")  # fmt: skip
    return ""
