"""Which handlers the fleet allows: one decision, checked where work enters and again
where it runs.

`shell` runs whatever command its arguments name, so it is off until an admin enables it
for the whole deployment (`sundial shell-handler enable`). The decision is a row in
`fleet_settings`: every submit path (runs, DAGs, job definitions, workflows, schedules)
calls `refuse_disabled_handlers`, and the `shell` handler reads it again before it runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from psycopg.types.json import Jsonb

from app.db import Conn
from app.errors import UsageError
from app.sql import query

SHELL = "shell"
SHELL_SETTING = "shell_handler_enabled"
SHELL_DISABLED_MESSAGE = (
    "the shell handler is disabled for this deployment; an admin can enable it with "
    "`sundial shell-handler enable`"
)


class HandlerDisabled(UsageError):
    """The work would run a handler the fleet has turned off."""


def shell_enabled(conn: Conn) -> bool:
    row = conn.execute(query("fleet", "fleet_setting_get"), {"name": SHELL_SETTING}).fetchone()
    return row is not None and row["value"] is True


def set_shell_enabled(
    conn: Conn, enabled: bool, actor: str, *, now: datetime | None = None
) -> None:
    """Record the fleet's decision (and who made it, in the audit log)."""
    conn.execute(
        query("fleet", "fleet_setting_put"),
        {"name": SHELL_SETTING, "value": Jsonb(enabled), "actor": actor, "now": now},
    )


def refuse_disabled_handlers(
    conn: Conn,
    handlers: Iterable[str] = (),
    *,
    job_id: uuid.UUID | None = None,
    workflow_id: uuid.UUID | None = None,
) -> None:
    """Raise HandlerDisabled when `handlers`, the job definition `job_id` or a step of the
    workflow `workflow_id` would run a handler the fleet has turned off.

    Costs nothing for plain submits of other handlers: the database is read only when
    `shell` is named or a stored target must be looked at.
    """
    names = set(handlers)
    if job_id is not None or workflow_id is not None:
        params = {"job_id": job_id, "workflow_id": workflow_id}
        rows = conn.execute(query("fleet", "handlers_of_targets"), params).fetchall()
        names.update(r["handler"] for r in rows)
    if SHELL in names and not shell_enabled(conn):
        raise HandlerDisabled(SHELL_DISABLED_MESSAGE)
