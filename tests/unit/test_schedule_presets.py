"""Presets make the cron a person would otherwise have to know, and read it back."""

from __future__ import annotations

import pytest

from app.scheduling.cron_expressions import parse_cron
from app.scheduling.schedule_presets import Choice, Preset, PresetError, Rule, choice_of, rule_of


@pytest.mark.parametrize(
    ("choice", "rule"),
    [
        (Choice(preset="every_n_minutes", every_minutes="15"), Rule("*/15 * * * *", None)),
        (Choice(preset="every_n_minutes", every_minutes="1"), Rule("* * * * *", None)),
        (Choice(preset="hourly", minute="5"), Rule("5 * * * *", None)),
        (Choice(preset="daily", at="02:30"), Rule("30 2 * * *", None)),
        (Choice(preset="weekdays", at="09:00"), Rule("0 9 * * 1-5", None)),
        (Choice(preset="weekly", at="7:05", days=("0", "1", "3")), Rule("5 7 * * 0,1,3", None)),
        (Choice(preset="monthly", at="23:59"), Rule("59 23 1 * *", None)),
        (Choice(preset="interval", every="90", unit="seconds"), Rule(None, 90)),
        (Choice(preset="interval", every="2", unit="hours"), Rule(None, 7200)),
        (Choice(preset="custom", cron="  0  9 * *   1-5 "), Rule("0 9 * * 1-5", None)),
    ],
)
def test_each_preset_makes_its_rule(choice: Choice, rule: Rule) -> None:
    assert rule_of(choice) == rule
    if rule.cron is not None:
        parse_cron(rule.cron)  # a cron Sundial itself accepts


@pytest.mark.parametrize(
    ("choice", "field", "message"),
    [
        (Choice(preset="often"), "preset", "choose how often"),
        (Choice(preset="every_n_minutes", every_minutes="7"), "every_minutes", "divide the hour"),
        (Choice(preset="hourly", minute="60"), "minute", "between 0 and 59"),
        (Choice(preset="hourly", minute="x"), "minute", "whole number"),
        (Choice(preset="daily", at="25:00"), "at", "not a time of day"),
        (Choice(preset="weekly", days=()), "days", "at least one day"),
        (Choice(preset="weekly", days=("8",)), "days", "at least one day"),
        (Choice(preset="interval", every="0"), "every", "at least 1"),
        (Choice(preset="interval", every="5", unit="weeks"), "unit", "seconds, minutes or hours"),
        (Choice(preset="custom", cron="  "), "cron", "type a cron expression"),
    ],
)
def test_a_bad_field_is_named_with_a_reason(choice: Choice, field: str, message: str) -> None:
    with pytest.raises(PresetError, match=message) as caught:
        rule_of(choice)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "choice",
    [
        Choice(preset=Preset.EVERY_N_MINUTES.value, every_minutes="20"),
        Choice(preset=Preset.EVERY_N_MINUTES.value, every_minutes="1"),
        Choice(preset=Preset.HOURLY.value, minute="45"),
        Choice(preset=Preset.DAILY.value, at="02:30"),
        Choice(preset=Preset.WEEKDAYS.value, at="09:00"),
        Choice(preset=Preset.WEEKLY.value, at="18:15", days=("0", "6")),
        Choice(preset=Preset.MONTHLY.value, at="06:00"),
        Choice(preset=Preset.INTERVAL.value, every="3", unit="hours"),
        Choice(preset=Preset.INTERVAL.value, every="45", unit="seconds"),
        Choice(preset=Preset.CUSTOM.value, cron="0 0 L * *"),
    ],
)
def test_a_stored_rule_reads_back_as_the_preset_that_made_it(choice: Choice) -> None:
    rule = rule_of(choice)
    assert choice_of(rule.cron, rule.every_seconds) == choice


def test_an_interval_reads_back_in_its_largest_whole_unit() -> None:
    assert choice_of(None, 120) == Choice(preset="interval", every="2", unit="minutes")
