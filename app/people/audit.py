"""The audit log: who changed what, when, and what it was before and after.

Domain functions that change something a person asked for call `record` in the same
transaction as the change, so the log never claims a change that was rolled back, nor
misses one that was made.

    record(conn, "alice", "job.update", "job", "nightly", before={...}, after={...},
           subject_id=job_id)
"""

from __future__ import annotations

import getpass
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from app.core.db import Conn
from app.core.sql import query

AUDIT_PAGE_SIZE = 100
CLI_ACTOR = "cli"  # a command-line change's actor: `cli:<operating-system user>`


def _dumps(value: Any) -> str:
    # Snapshots hold ids, instants and numbers: their text form is what a person reads.
    return json.dumps(value, default=str, sort_keys=True)


def cli_actor() -> str:
    """Who a change made from the command line is recorded as: the operating-system user."""
    try:
        return f"{CLI_ACTOR}:{getpass.getuser()}"
    except (KeyError, OSError):
        return CLI_ACTOR


def record(
    conn: Conn,
    actor: str,
    action: str,
    target_type: str,
    target_id: str | None,
    *,
    before: Any = None,
    after: Any = None,
    now: datetime | None = None,
    subject_id: uuid.UUID | None = None,
) -> None:
    """One audit row; `before` / `after` are JSON-able snapshots (None: did not exist).
    `now` stamps it (None: the database clock). `subject_id` is the target's stable id,
    which its version history follows through renames (`target_id` is the name)."""
    details = {"before": before, "after": after}
    conn.execute(
        query("audit", "audit_insert"),
        {
            "actor": actor,
            "action": action,
            "target_type": target_type,
            "target_id": target_id,
            "subject_id": subject_id,
            "details": Jsonb(details, dumps=_dumps),
            "now": now,
        },
    )


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """What the audit page asks for; None means any."""

    actor: str | None = None
    action: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def entries(conn: Conn, where: AuditFilter, limit: int = AUDIT_PAGE_SIZE) -> list[dict[str, Any]]:
    params = {
        "actor": where.actor,
        "action": where.action,
        "since": where.since,
        "until": where.until,
        "limit": limit,
    }
    return conn.execute(query("audit", "audit_list"), params).fetchall()


def filter_choices(conn: Conn) -> tuple[list[str], list[str]]:
    """Actors and actions present in the log, sorted, for the page's filter menus."""
    rows = conn.execute(query("audit", "audit_actions")).fetchall()
    return sorted({r["actor"] for r in rows}), sorted({r["action"] for r in rows})


def last_action(
    conn: Conn, target_type: str, subject_id: uuid.UUID, action: str
) -> dict[str, Any] | None:
    """The newest entry of `action` on the subject (`at`, `actor`, `details`), or None."""
    params = {"target_type": target_type, "subject_id": subject_id, "action": action}
    row: dict[str, Any] | None = conn.execute(
        query("audit", "audit_last_action_on_subject"), params
    ).fetchone()
    return row
