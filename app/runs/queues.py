"""Named queues: a run waits in the queue its job definition or its submit names (`default`
unless given), and each worker claims from one queue. A queue can be paused fleet-wide:
no worker starts anything from it until it is resumed, and nothing in it is lost.

    pause(conn, "reports", actor="alice", note="the warehouse is being migrated")
    resume(conn, "reports", actor="alice")
    [q.name for q in overview(conn)]   # every queue in use, with its depth and its pause
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from pydantic import Field

from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError, about
from app.core.fields import Fields, Name, column, moment
from app.core.sql import query
from app.people import audit

THROUGHPUT_MINUTES = 15  # runs ended per minute, over this many minutes


class QueueError(UsageError):
    """A queue cannot be changed as asked; the message says why."""


class QueueFields(Fields):
    """A queue's fleet-wide settings (the `queues` table): whether it is paused, by whom,
    when and why. A queue without a row there is open."""

    name: Name = column(sa.Text, primary_key=True)
    paused: bool = column(sa.Boolean, default=False, server_default=sa.false())
    paused_by: str | None = column(sa.Text, nullable=True)
    paused_note: str | None = column(sa.Text, nullable=True)
    paused_at: datetime | None = moment()


class QueueRow(QueueFields):
    """A queue as the Queues page, the API and the CLI show it: its settings, and what
    waits in it and runs from it."""

    pending: int = Field(description="Runs waiting, due or not.")
    due: int = Field(description="Runs waiting and due now.")
    running: int
    oldest_wait_seconds: float | None = Field(description="How long the oldest due run waited.")
    ended_per_minute: list[int] = Field(description="Runs ended per minute, oldest first.")


def check_name(name: str) -> str:
    with about("queue"), limits.refused_as(QueueError):
        return limits.check_name("a queue name", name)


def pause(
    conn: Conn, name: str, *, actor: str, note: str | None = None, now: datetime | None = None
) -> None:
    """Stop every worker starting runs from queue `name`; running runs go on."""
    check_name(name)
    if note is not None:
        with about("note"), limits.refused_as(QueueError):
            limits.check_text("the note", note)
    with conn.transaction():
        before = _setting(conn, name)
        conn.execute(
            query("queues", "queue_pause"),
            {"name": name, "actor": actor, "note": note or None, "now": now},
        )
        audit.record(conn, actor, "queue.pause", "queue", name, before=before,
                     after={"paused": True, "note": note or None}, now=now)  # fmt: skip


def resume(conn: Conn, name: str, *, actor: str, now: datetime | None = None) -> None:
    """Let workers start runs from queue `name` again (a queue not paused is left as is)."""
    check_name(name)
    with conn.transaction():
        before = _setting(conn, name)
        if not before["paused"]:
            raise QueueError(f"queue {name!r} is not paused", "queue")
        conn.execute(query("queues", "queue_resume"), {"name": name, "now": now})
        audit.record(conn, actor, "queue.resume", "queue", name, before=before,
                     after={"paused": False}, now=now)  # fmt: skip


def _setting(conn: Conn, name: str) -> dict[str, object]:
    row = conn.execute(query("queues", "queue_setting"), {"name": name}).fetchone()
    if row is None:
        return {"paused": False, "note": None}
    return {"paused": row["paused"], "note": row["paused_note"]}


def overview(conn: Conn, now: datetime | None = None) -> list[QueueRow]:
    """Every queue in use (with runs waiting, running or ended lately, or settings), and
    `default`, by name."""
    rows = conn.execute(
        query("queues", "queue_overview"), {"minutes": THROUGHPUT_MINUTES, "now": now}
    )
    return [QueueRow.model_validate(row) for row in rows]
