"""The schedule editor's form: its fields and defaults, reading what a person filled in into
a `ScheduleSpec` (presets, zone, catch-up, target), and which field of the form a refusal
belongs to. Pure: the pages in `app.web.schedules` call it.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.datastructures import FormData

from app.catalog import job_definitions
from app.catalog.job_definitions import JobError
from app.core.errors import UsageError
from app.scheduling import (
    schedule_spec,
)
from app.scheduling.cron import DstRepeated, DstSkipped
from app.scheduling.cron_expressions import RecurrenceError
from app.scheduling.fire_decisions import DEFAULT_SPREAD_SECONDS, OverlapPolicy
from app.scheduling.schedule_presets import (
    Choice,
    Preset,
    PresetError,
    choice_of,
    rule_of,
)
from app.scheduling.schedule_spec import ScheduleError, ScheduleSpec
from app.scheduling.zones import zone_by_city, zone_named
from app.web.forms import WHOLE_FORM

TEXT_FIELDS = ("name", "target_kind", "job", "workflow", "handler", "args", "preset",
               "every_minutes", "minute", "at", "cron", "every", "unit", "timezone", "catchup",
               "overlap", "spread_seconds", "dst_skipped", "dst_repeated",
               "auto_pause_after", "expire_after_minutes", "calendar")  # fmt: skip


DEFAULTS = {
    "target_kind": "job", "handler": "", "args": "{}", "preset": Preset.WEEKDAYS.value,
    "every_minutes": "15", "minute": "0", "at": "09:00", "every": "30", "unit": "minutes",
    "timezone": "UTC",
    "catchup": "latest", "overlap": OverlapPolicy.SKIP.value,
    "spread_seconds": str(DEFAULT_SPREAD_SECONDS),
    "dst_skipped": DstSkipped.SHIFT.value, "dst_repeated": DstRepeated.FIRST.value,
    "calendar": "",
}  # fmt: skip


# What a schedule may run, and the form field that names it: an existing job, a workflow,
# or a new job made with the schedule from a handler and its arguments.
TARGET_FIELDS = {"job": "job", "workflow": "workflow", "new": "handler"}


# Domain fields the form calls otherwise (the rest keep their names).
FORM_NAMES = {"every_seconds": "every", "catchup_limit": "catchup",
              "catchup_window_seconds": "catchup",
              "expire_after_seconds": "expire_after_minutes"}  # fmt: skip


CHOICE_FIELDS = ("preset", "every_minutes", "minute", "at", "cron", "every", "unit")


def form_values(form: FormData) -> dict[str, Any]:
    values: dict[str, Any] = {f: str(form.get(f, "")).strip() for f in TEXT_FIELDS}
    values["days"] = [str(d) for d in form.getlist("days")]
    values["exact_minute"] = form.get("exact_minute") == "yes"
    values["timezone"] = zone_by_city(values["timezone"])
    return values


def values_of_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored schedule as the edit form shows it."""
    choice = choice_of(row["cron"], row["interval_seconds"])
    values: dict[str, Any] = {**DEFAULTS, **{f: getattr(choice, f) for f in CHOICE_FIELDS}}
    catchup = "all" if row["catchup"] and row["catchup_limit"] is None else "latest"
    if row["catchup"] and row["catchup_limit"] is not None:
        catchup = str(row["catchup_limit"])
    values.update(
        name=row["name"], days=list(choice.days), timezone=row["timezone"], catchup=catchup,
        overlap=row["overlap"], exact_minute=row["exact_minute"],
        spread_seconds=str(row["spread_seconds"]), dst_skipped=row["dst_skipped"],
        dst_repeated=row["dst_repeated"], auto_pause_after=str(row["auto_pause_after"] or ""),
        expire_after_minutes=_minutes(row["expire_after_seconds"]),
        target_kind="workflow" if row["workflow_name"] else "job",
        job=row["job_name"] or "", workflow=row["workflow_name"] or "",
        calendar=row["calendar_name"] or "",
    )  # fmt: skip
    return values


def kept_on_edit(row: dict[str, Any]) -> dict[str, Any]:
    """The form values an edit does not change (name and target), from the stored row."""
    stored = values_of_row(row)
    return {f: stored[f] for f in ("name", "target_kind", "job", "workflow")}


def _minutes(seconds: int | None) -> str:
    """Seconds as the form's minutes: `90` is `1.5`."""
    return "" if seconds is None else f"{seconds / 60:g}"


def _seconds_of_minutes(text: str) -> int | None:
    """The form's minutes (a decimal allowed) as whole seconds; empty: none."""
    if not text:
        return None
    try:
        minutes = float(text)
    except ValueError:
        minutes = math.nan
    if not math.isfinite(minutes) or minutes * 60 < 1:
        raise UsageError(
            f"the minutes a run may wait must be a number of at least 1 second, got {text!r}",
            "expire_after_minutes",
        )
    return round(minutes * 60)


def _whole(text: str, field: str, label: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise UsageError(f"{label} must be a whole number", field)
    return int(text)


def spec_of(values: dict[str, Any]) -> ScheduleSpec:
    """The schedule the form asks for; a UsageError names the field at fault."""
    choice = Choice(**{f: values[f] for f in CHOICE_FIELDS}, days=tuple(values["days"]))
    try:
        rule = rule_of(choice)
    except PresetError as exc:
        raise UsageError(str(exc), exc.field) from None
    try:
        zone_named(values["timezone"])
    except RecurrenceError as exc:
        raise UsageError(str(exc), "timezone") from None
    try:
        catchup, catchup_limit = schedule_spec.parse_catchup(values["catchup"] or "latest")
        overlap = OverlapPolicy(values["overlap"])
        dst_skipped, dst_repeated = (
            DstSkipped(values["dst_skipped"]),
            DstRepeated(values["dst_repeated"]),
        )
    except ScheduleError as exc:
        raise UsageError(str(exc), "catchup") from None
    except ValueError:
        raise UsageError("choose one of the options offered", "form") from None
    auto_pause = values["auto_pause_after"]
    kind = values["target_kind"] if values["target_kind"] in TARGET_FIELDS else "job"
    if not values["name"]:
        raise UsageError("give the schedule a name", "name")
    if not values[TARGET_FIELDS[kind]]:
        wanted = "handler" if kind == "new" else kind
        raise UsageError(f"choose the {wanted} this schedule runs", TARGET_FIELDS[kind])
    args: dict[str, Any] = {}
    if kind == "new":
        try:
            args = job_definitions.parse_args(values["args"])
        except JobError as exc:
            raise UsageError(str(exc), "args") from None
    return ScheduleSpec.model_construct(
        name=values["name"], cron=rule.cron, every_seconds=rule.every_seconds,
        timezone=values["timezone"], overlap=overlap, catchup=catchup,
        catchup_limit=catchup_limit, exact_minute=values["exact_minute"],
        spread_seconds=_whole(values["spread_seconds"], "spread_seconds", "the spread window"),
        dst_skipped=dst_skipped, dst_repeated=dst_repeated,
        auto_pause_after=(
            _whole(auto_pause, "auto_pause_after", "auto-pause after") if auto_pause else None
        ),
        expire_after_seconds=_seconds_of_minutes(values["expire_after_minutes"]),
        job=values["job"] if kind == "job" else None,
        workflow=values["workflow"] if kind == "workflow" else None,
        handler=values["handler"] if kind == "new" else None,
        args=args,
    )  # fmt: skip


def _rule_field(values: dict[str, Any]) -> str:
    """Where an error about the rule goes: the cron field, or the preset's own fields."""
    return "cron" if values["preset"] == Preset.CUSTOM.value else "preset"


def form_field(field: str, values: dict[str, Any]) -> str:
    """The form's field for a domain field: the rule's, the target's, or its own name."""
    if field == "cron":
        return _rule_field(values)
    if field in ("job", "workflow", "handler"):
        return TARGET_FIELDS.get(values["target_kind"], "job")
    return FORM_NAMES.get(field, field if field in TEXT_FIELDS or field == "days" else WHOLE_FORM)
