"""A live worker declaring its handler's argument schema, and reading a form's field
errors: shared by the job form's and the run-with-arguments tests."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]
SCHEMA = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "description": "Who gets the <script>alert(1)</script>"},
        "retries": {"type": "integer", "default": 3},
        "urgent": {"type": "boolean"},
        "tone": {"enum": ["plain", "loud"]},
    },
    "required": ["email"],
}


def live_worker_declaring(conn: Conn, schema: dict[str, Any] = SCHEMA) -> None:
    conn.execute(
        "INSERT INTO workers (id, host, pid, concurrency, handlers, handler_args) "
        "VALUES ('w1', 'h', 1, 1, '[\"report\"]', %s)",
        (json.dumps({"report": schema}),),
    )


def error_of(html: str, field_id: str) -> str | None:
    found = re.search(rf'<p class="field-error" id="{field_id}-error">([^<]*)</p>', html)
    return found[1] if found else None
