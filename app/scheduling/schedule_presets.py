"""Schedule rules for people who do not know cron: a preset and its few fields make the
cron expression (or the interval) a schedule stores.

Pure functions, no clock and no database, so the web form, its live preview and the tests
all read one set of rules.

    >>> rule_of(Choice(preset=Preset.WEEKDAYS, at="09:00"))
    Rule(cron='0 9 * * 1-5', every_seconds=None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from app.core.errors import UsageError


class Preset(StrEnum):
    EVERY_N_MINUTES = "every_n_minutes"
    HOURLY = "hourly"
    DAILY = "daily"
    WEEKDAYS = "weekdays"
    WEEKLY = "weekly"
    MONTHLY = "monthly"
    INTERVAL = "interval"
    CUSTOM = "custom"


PRESET_LABELS = {
    Preset.EVERY_N_MINUTES: "Every few minutes",
    Preset.HOURLY: "Every hour",
    Preset.DAILY: "Every day",
    Preset.WEEKDAYS: "Every weekday (Monday to Friday)",
    Preset.WEEKLY: "Every week on chosen days",
    Preset.MONTHLY: "First day of every month",
    Preset.INTERVAL: "At a fixed interval (counted from when it starts)",
    Preset.CUSTOM: "Custom (cron expression)",
}
# Steps that divide the hour evenly: `*/7` would fire at :56 and again at :00.
MINUTE_STEPS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)
# Cron's day numbers, Monday first as people read a week.
DAYS = (("1", "Monday"), ("2", "Tuesday"), ("3", "Wednesday"), ("4", "Thursday"),
        ("5", "Friday"), ("6", "Saturday"), ("0", "Sunday"))  # fmt: skip
UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600}
_TIME = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


class PresetError(UsageError):
    """A preset's field is not usable; `field` names it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Choice:
    """What the form holds, as text, exactly as typed."""

    preset: str = Preset.DAILY.value
    every_minutes: str = "15"
    minute: str = "0"
    at: str = "09:00"
    days: tuple[str, ...] = ("1",)
    cron: str = ""
    every: str = "30"
    unit: str = "minutes"


@dataclass(frozen=True, slots=True)
class Rule:
    cron: str | None
    every_seconds: int | None


def rule_of(choice: Choice) -> Rule:
    """The cron expression or interval `choice` stands for; PresetError names the field."""
    try:
        preset = Preset(choice.preset)
    except ValueError:
        raise PresetError("choose how often the schedule runs", "preset") from None
    if preset is Preset.CUSTOM:
        text = " ".join(choice.cron.split())
        if not text:
            raise PresetError("type a cron expression, like 0 9 * * 1-5", "cron")
        return Rule(text, None)
    if preset is Preset.INTERVAL:
        count = _whole(choice.every, "every", "the interval", 1)
        if choice.unit not in UNIT_SECONDS:
            raise PresetError("choose seconds, minutes or hours", "unit")
        return Rule(None, count * UNIT_SECONDS[choice.unit])
    if preset is Preset.EVERY_N_MINUTES:
        step = _whole(choice.every_minutes, "every_minutes", "the number of minutes", 1)
        if step not in MINUTE_STEPS:
            raise PresetError(
                f"every {step} minutes does not divide the hour evenly; choose one of "
                f"{', '.join(map(str, MINUTE_STEPS))}, or use a fixed interval",
                "every_minutes",
            )
        return Rule("* * * * *" if step == 1 else f"*/{step} * * * *", None)
    if preset is Preset.HOURLY:
        minute = _whole(choice.minute, "minute", "the minute", 0, 59)
        return Rule(f"{minute} * * * *", None)
    hour, minute = _time(choice.at)
    if preset is Preset.DAILY:
        return Rule(f"{minute} {hour} * * *", None)
    if preset is Preset.WEEKDAYS:
        return Rule(f"{minute} {hour} * * 1-5", None)
    if preset is Preset.MONTHLY:
        return Rule(f"{minute} {hour} 1 * *", None)
    known = [number for number, _ in DAYS]
    days = [d for d in known if d in choice.days]
    if not days or set(choice.days) - set(known):
        raise PresetError("tick at least one day of the week", "days")
    return Rule(f"{minute} {hour} * * {','.join(sorted(days))}", None)


def choice_of(cron: str | None, every_seconds: int | None) -> Choice:
    """The preset a stored rule reads as (for the edit form); custom when none fits."""
    if every_seconds is not None:
        for unit in ("hours", "minutes", "seconds"):
            if every_seconds % UNIT_SECONDS[unit] == 0:
                count = every_seconds // UNIT_SECONDS[unit]
                return Choice(preset=Preset.INTERVAL.value, every=str(count), unit=unit)
    text = cron or ""
    fields = text.split()
    if len(fields) == 5:
        minute, hour, day, month, weekday = fields
        if fields == ["*", "*", "*", "*", "*"]:
            return Choice(preset=Preset.EVERY_N_MINUTES.value, every_minutes="1")
        step = re.fullmatch(r"\*/(\d+)", minute)
        if step and int(step[1]) in MINUTE_STEPS and fields[1:] == ["*"] * 4:
            return Choice(preset=Preset.EVERY_N_MINUTES.value, every_minutes=step[1])
        if minute.isdigit() and int(minute) < 60 and fields[1:] == ["*"] * 4:
            return Choice(preset=Preset.HOURLY.value, minute=minute)
        if minute.isdigit() and hour.isdigit() and int(minute) < 60 and int(hour) < 24:
            at = f"{int(hour):02d}:{int(minute):02d}"
            preset = _fixed_time_preset(day, month, weekday)
            if preset is Preset.WEEKLY:
                return Choice(preset=preset.value, at=at, days=tuple(weekday.split(",")))
            if preset is not None:
                return Choice(preset=preset.value, at=at)
    return Choice(preset=Preset.CUSTOM.value, cron=text)


def _fixed_time_preset(day: str, month: str, weekday: str) -> Preset | None:
    if month != "*":
        return None
    if (day, weekday) == ("*", "*"):
        return Preset.DAILY
    if (day, weekday) == ("*", "1-5"):
        return Preset.WEEKDAYS
    if (day, weekday) == ("1", "*"):
        return Preset.MONTHLY
    numbers = weekday.split(",")
    if (
        day == "*"
        and all(n in {d for d, _ in DAYS} for n in numbers)
        and numbers == sorted(set(numbers))
    ):
        return Preset.WEEKLY
    return None


def _time(text: str) -> tuple[int, int]:
    match = _TIME.match(text.strip())
    if not match:
        raise PresetError(f"{text!r} is not a time of day; use HH:MM, like 09:30", "at")
    return int(match[1]), int(match[2])


def _whole(text: str, field: str, label: str, low: int, high: int | None = None) -> int:
    value = text.strip()
    if not (value.isascii() and value.isdigit()):
        raise PresetError(f"{label} must be a whole number", field)
    number = int(value)
    if number < low or (high is not None and number > high):
        span = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise PresetError(f"{label} must be {span}", field)
    return number
