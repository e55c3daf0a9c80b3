"""A cron rule in words, agreeing with the fires `app.scheduling.cron` gives for it.

cron-descriptor writes the words for each field, but two of its readings differ from the
fires: it reads a single-value range (`9-9`) as "between 09:00 and 09:59", and it joins the
day of the month and the weekday with "or" whenever both are given, while cron (and
`app.scheduling.cron`) uses "or" only when neither field starts with `*`. So the rule is first read
by `app.scheduling.cron_expressions.parse_cron` (refused rules get its sentence), single-value
ranges are written as the one value, and the two day fields are joined here, with "or" or "only
when" as the parsed rule says.
"""

from __future__ import annotations

import functools
import re

from cron_descriptor import ExpressionDescriptor, Options

from app.scheduling.cron_expressions import ALIASES, RecurrenceError, parse_cron

_SINGLE_RANGE = re.compile(r"^([0-9a-z]+)-\1(?:/[0-9]+)?$", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # lists repeat a few rules many times; describing one is slow
def cron_sentence(expression: str | None) -> str:
    """`0 9 * * 1-5` -> `At 09:00, Monday through Friday` (24-hour clock).

    A rule `app.scheduling.cron` refuses is shown as written: the pages only show saved rules, which
    passed that same reading."""
    if not expression:
        return ""
    try:
        rule = parse_cron(expression)
    except RecurrenceError:
        return expression
    fields = [_one_value_ranges(field) for field in _fields(rule.text)]
    try:
        return _sentence(fields, rule.days_or_weekdays)
    except Exception:  # cron-descriptor cannot word it: shown as cron reads it, never an error
        return " ".join(fields)


def _sentence(fields: list[str], days_or_weekdays: bool) -> str:
    describe = _descriptor(" ".join(fields))
    time = describe.get_time_of_day_description()
    months = describe.get_month_description()
    if fields[2] == "*":  # the weekdays alone (none for `*`), in cron-descriptor's words
        days = describe.get_day_of_week_description()
    elif fields[4] == "*":
        days = describe.get_day_of_month_description()
    else:
        days_of_month = describe.get_day_of_month_description()
        weekday_words = describe.get_day_of_week_description().lstrip(", ")
        on_weekdays = weekday_words.removeprefix("or ").removeprefix("only ").removeprefix("on ")
        if days_or_weekdays:
            days = f"{days_of_month}, or on {on_weekdays}"
        else:
            days = (
                f"{days_of_month}, only when that day is {_a(on_weekdays.replace(' and ', ' or '))}"
            )
    sentence = str(describe.transform_verbosity(f"{time}{days}{months}", use_verbose_format=False))
    return sentence[:1].upper() + sentence[1:]


def _a(weekdays: str) -> str:
    """`a Monday`, but `every 2 days of the week` as it is."""
    return weekdays if weekdays.startswith("every") else f"a {weekdays}"


def _fields(text: str) -> list[str]:
    return ALIASES.get(text.lower(), text).split(" ")


def _one_value_ranges(field: str) -> str:
    """`9-9` -> `9` in each item of a field: the value cron reads there."""
    return ",".join(
        m.group(1) if (m := _SINGLE_RANGE.match(item)) else item for item in field.split(",")
    )


def _descriptor(expression: str) -> ExpressionDescriptor:
    options = Options()
    options.use_24hour_time_format = True
    return ExpressionDescriptor(expression, options)
