"""The trigger: the leader among trigger processes turns due schedules into runs."""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg

from app.config import Settings
from app.services.periodic import run_periodic

log = logging.getLogger(__name__)


class Trigger:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run_once(self, conn: psycopg.Connection[dict[str, Any]]) -> int:
        conn.execute("SELECT 1")
        return 0

    def run_forever(self, url: str, stop: threading.Event) -> None:
        run_periodic("trigger", url, self.settings.trigger_interval_seconds, self.run_once, stop)
