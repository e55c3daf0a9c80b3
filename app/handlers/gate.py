"""Which handlers the fleet allows: one decision, checked where work enters and again
where it runs.

`shell` runs whatever command its arguments name, so it is off until an admin enables it
for the whole deployment (`sundial shell-handler enable`). The decision is a row in
`fleet_settings`: every submit path (runs, DAGs, job definitions, workflows, schedules)
calls `refuse_disabled_handlers`, and the `shell` handler reads it again before it runs.
The same call refuses work that runs commands to anyone but an admin, at every door
(`may_run_commands`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from contextvars import ContextVar
from datetime import datetime

from psycopg.types.json import Jsonb

from app.core.db import Conn
from app.core.errors import NotAllowed, UsageError
from app.core.sql import query

SHELL = "shell"
COMMAND_HANDLERS = frozenset({SHELL})  # handlers that run a command of their arguments' choosing
SHELL_SETTING = "shell_handler_enabled"
SHELL_DISABLED_MESSAGE = (
    "the shell handler is disabled for this deployment; an admin can enable it with "
    "`sundial shell-handler enable`"
)


class HandlerDisabled(UsageError):
    """The work would run a handler the fleet has turned off."""


# Whether whoever acts now may start commands: the web and the API set it per request from
# the signed-in person's or token's role (admins only); the CLI, the trigger and the worker
# act as the deployment itself.
may_run_commands: ContextVar[bool] = ContextVar("may_run_commands", default=True)
COMMANDS_NEED_ADMIN = (
    "only an admin may start work that runs commands (the shell handler): ask an admin to "
    "run it, or use a job that does not run commands"
)


def refuse_commands_for_run(conn: Conn, run_id: int) -> None:
    """NotAllowed when a non-admin would run again a run of a handler that runs commands."""
    if may_run_commands.get():
        return
    row = conn.execute(query("fleet", "handler_of_run"), {"id": run_id}).fetchone()
    if row is not None and row["handler"] in COMMAND_HANDLERS:
        raise NotAllowed(COMMANDS_NEED_ADMIN)


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
    if names & COMMAND_HANDLERS and not may_run_commands.get():
        raise NotAllowed(COMMANDS_NEED_ADMIN)
    if SHELL in names and not shell_enabled(conn):
        raise HandlerDisabled(SHELL_DISABLED_MESSAGE)
