"""The schedules list: the rule as a sentence, the next fire in the schedule's zone, pauses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from starlette.testclient import TestClient

from app.scheduling import schedules
from app.scheduling.schedule_spec import ScheduleSpec


def test_schedules_show_their_rule_in_words_and_next_fire_in_their_zone(
    as_role: Callable[[str], TestClient], conn: psycopg.Connection[Any]
) -> None:
    created = schedules.create_schedule(
        conn,
        ScheduleSpec(name="<script>x</script>", cron="0 9 * * 1-5", timezone="Europe/Berlin",
                     handler="noop"),
    )  # fmt: skip
    schedules.create_schedule(conn, ScheduleSpec(name="often", every_seconds=900, handler="noop"))
    schedules.pause(conn, "often", note="quarter close")
    page = as_role("viewer").get("/schedules").text
    assert "At 09:00, Monday through Friday" in page
    assert "Every 15 min" in page
    local = created.next_fire_time.astimezone(ZoneInfo("Europe/Berlin"))
    assert local.strftime("%Y-%m-%d 09:00 %Z") in page
    assert "paused: quarter close" in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x" not in page
