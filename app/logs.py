"""Structured logs: one JSON object per line, carrying run id and attempt where there is one.

Pass context with `extra`: `log.info("run completed", extra={"run_id": 7, "attempt": 2})`.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from app.cli.text import safe_lines

CONTEXT_FIELDS = (
    "run_id",
    "attempt",
    "worker",
    "schedule_id",
    "handler",
    "term",
    "count",
    "outcome",
    "error",
)


class JsonFormatter(logging.Formatter):
    def __init__(self, process_name: str) -> None:
        super().__init__()
        self.process_name = process_name

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "process": self.process_name,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in CONTEXT_FIELDS:
            value = record.__dict__.get(field)
            if value is not None:
                entry[field] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """Lines for a terminal: what handlers and people wrote (errors, names) can hold escape
    sequences, printed escaped; JSON lines are escaped by the JSON encoding itself."""

    def __init__(self, process_name: str) -> None:
        super().__init__(f"%(asctime)s {process_name} %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = [
            f"{f}={record.__dict__[f]}"
            for f in CONTEXT_FIELDS
            if record.__dict__.get(f) is not None
        ]
        return safe_lines(f"{line} [{' '.join(context)}]" if context else line)


def configure_logging(process_name: str, level: str = "INFO", fmt: str = "json") -> None:
    """Send every log line of this process to stderr in `fmt` ("json" or "text")."""
    handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter(process_name) if fmt == "json" else TextFormatter(process_name)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("pgserver", "alembic", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
