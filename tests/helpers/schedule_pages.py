"""The schedule editor's form, filled in as a person would."""

from __future__ import annotations

FORM = {"name": "morning report", "target_kind": "job", "job": "report", "preset": "weekdays",
        "at": "09:00", "timezone": "Europe/Berlin", "catchup": "latest", "overlap": "skip",
        "spread_seconds": "60", "dst_skipped": "shift", "dst_repeated": "first",
        "every_minutes": "15", "minute": "0", "every": "30", "unit": "minutes", "cron": "",
        "auto_pause_after": ""}  # fmt: skip
