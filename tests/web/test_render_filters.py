"""The template filters: plain words for durations, instants in a zone, cron as a sentence."""

from __future__ import annotations

from datetime import UTC, datetime

from app.web.render import cron_sentence, duration, every, in_zone, status_badge


def test_durations_read_as_words() -> None:
    assert [duration(s) for s in (0, 45, 300, 330, 3600, 9000, 86400, 90000, None)] == [
        "0 s", "45 s", "5 min", "5 min 30 s", "1 h", "2 h 30 min", "1 d", "1 d 1 h", "—",
    ]  # fmt: skip


def test_an_instant_is_shown_on_the_wall_clock_of_its_zone() -> None:
    winter = datetime(2026, 1, 15, 8, 0, tzinfo=UTC)
    summer = datetime(2026, 7, 15, 7, 0, tzinfo=UTC)
    assert in_zone(winter, "Europe/Berlin") == "2026-01-15 09:00 CET"
    assert in_zone(summer, "Europe/Berlin") == "2026-07-15 09:00 CEST"
    assert in_zone(winter) == "2026-01-15 08:00 UTC"
    assert in_zone(None) == "—"


def test_cron_and_intervals_read_as_sentences() -> None:
    assert cron_sentence("0 9 * * 1-5") == "At 09:00, Monday through Friday"
    assert cron_sentence("*/15 * * * *") == "Every 15 minutes"
    assert cron_sentence("not a cron") == "not a cron"
    assert every(900) == "Every 15 min"


def test_a_status_badge_escapes_what_it_shows() -> None:
    assert str(status_badge("timed_out")) == (
        '<span class="badge status-timed_out">timed out</span>'
    )
    assert "<script>" not in str(status_badge("<script>"))
