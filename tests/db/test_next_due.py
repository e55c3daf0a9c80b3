"""How long an idle worker may sleep: until the earliest pending run of its queue is due,
whatever its priority, against a real PostgreSQL (the look reads the first run of each
priority, not every pending run)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from app.runs import queues, submission
from app.runs.run_inserts import NewRun
from app.services.worker import _seconds_until_next_due

Conn = psycopg.Connection[Any]
NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _submit(conn: Conn, minutes: int, priority: int, queue: str = "q") -> None:
    run = NewRun("noop", queue=queue, priority=priority, run_at=NOW + timedelta(minutes=minutes))
    submission.submit(conn, run)


def test_the_earliest_run_of_any_priority_sets_the_wait(conn: Conn) -> None:
    assert _seconds_until_next_due(conn, "q", NOW) is None  # nothing pending
    for minutes, priority in [(30, 9), (50, 9), (20, 5), (40, 0), (10, -3), (60, -3)]:
        _submit(conn, minutes, priority)
    _submit(conn, 1, 0, queue="other")
    assert _seconds_until_next_due(conn, "q", NOW) == 600  # the lowest priority's first
    _submit(conn, -5, 5)  # overdue: no sleep
    assert _seconds_until_next_due(conn, "q", NOW) == -300
    assert _seconds_until_next_due(conn, "other", NOW) == 60


def test_a_paused_queue_has_nothing_coming_due(conn: Conn) -> None:
    _submit(conn, 1, 0)
    queues.pause(conn, "q", actor="alice")
    assert _seconds_until_next_due(conn, "q", NOW) is None
