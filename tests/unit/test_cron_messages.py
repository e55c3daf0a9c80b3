"""What a person is told when a schedule's rule gives no fire: the true reason, whether the
rule never matches a date, its end comes first, or its next fire lies past the latest date
Sundial schedules (`limits.LATEST`)."""

from __future__ import annotations

from datetime import datetime

import pytest

from app.scheduling.schedule_reads import preview
from app.scheduling.schedule_spec import ScheduleError, ScheduleSpec
from tests.helpers.waits import utc


def refusal(spec: ScheduleSpec, now: datetime) -> str:
    with pytest.raises(ScheduleError) as refused:
        preview(spec, now)
    return str(refused.value)


@pytest.mark.parametrize(
    ("spec", "now", "fire"),
    [
        # 2200 is no leap year: the next 29 February after 2196 is in 2204.
        (
            ScheduleSpec(name="leap", cron="0 0 29 2 *"),
            "2196-03-01T00:00",
            "2204-02-29 00:00 (UTC)",
        ),
        (
            ScheduleSpec(
                name="new year",
                cron="0 9 1 1 *",
                timezone="Europe/Berlin",
                start_at=utc("2199-06-01T00:00"),
            ),
            "2026-01-01T00:00",
            "2200-01-01 09:00 (Europe/Berlin)",
        ),
        (
            ScheduleSpec(
                name="yearly", every_seconds=365 * 86400, start_at=utc("2190-01-01T00:00")
            ),
            "2199-12-31T00:00",
            "2200-12-30 00:00 (UTC)",
        ),
    ],
)
def test_a_next_fire_past_the_latest_date_says_so(spec: ScheduleSpec, now: str, fire: str) -> None:
    message = refusal(spec, utc(now))
    assert "never fires" not in message
    assert f"next fire would be {fire}" in message
    assert "past the latest date Sundial schedules" in message
    assert "2200-01-01" in message


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_cron_that_matches_no_date_still_never_fires(expression: str) -> None:
    for now in ("2026-01-01T00:00", "2196-03-01T00:00"):
        message = refusal(ScheduleSpec(name="never", cron=expression), utc(now))
        assert (
            message
            == f"cron expression {expression!r} never fires: no date matches it within 9 years"
        )


def test_an_end_before_a_fire_past_the_latest_date_blames_the_end() -> None:
    spec = ScheduleSpec(name="leap", cron="0 0 29 2 *", end_at=utc("2199-01-01T00:00"))
    message = refusal(spec, utc("2196-03-01T00:00"))
    assert message == "the schedule would never fire: its end comes before its first fire"
