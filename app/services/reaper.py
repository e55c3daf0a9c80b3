"""The reaper: returns runs whose lease expired to pending (or failed), ages priorities.

Any number of reapers may run; each step is a conditional UPDATE that cannot touch a run
another actor has already moved.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg

from app.config import Settings
from app.services.periodic import run_periodic

log = logging.getLogger(__name__)


class Reaper:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run_once(self, conn: psycopg.Connection[dict[str, Any]]) -> dict[str, int]:
        conn.execute("SELECT 1")
        return {}

    def run_forever(self, url: str, stop: threading.Event) -> None:
        run_periodic("reaper", url, self.settings.reaper_interval_seconds, self.run_once, stop)
