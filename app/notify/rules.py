"""Notification rules: tell a channel about one kind of event, optionally only about one
job's (dead letters) or one schedule's (lag, dead man's switch). Events older than the rule
are never sent: a new rule does not replay history."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.catalog import job_definitions
from app.core.db import Conn
from app.core.errors import Missing, UsageError
from app.core.sql import query
from app.notify import channels
from app.people import audit

EVENTS = {
    "dead_letter": "a new group of dead letters (runs that failed for good with a new error)",
    "breaker_open": "a service's circuit breaker opens (runs that call it wait)",
    "lag": "a schedule's run starts later than its lag threshold",
    "dead_man": "a schedule's expected fire did not run (dead man's switch)",
}
EVENT_LABELS = {
    "dead_letter": "New dead letters",
    "breaker_open": "A service paused (circuit breaker opened)",
    "lag": "A schedule started late (over its lag threshold)",
    "dead_man": "A schedule did not fire (dead man's switch)",
}
FOR_JOB = ("dead_letter",)
FOR_SCHEDULE = ("lag", "dead_man")


class RuleError(UsageError):
    pass


class UnknownRule(RuleError, Missing):
    pass


@dataclass(frozen=True, slots=True)
class Rule:
    id: uuid.UUID
    channel_id: uuid.UUID
    channel: str
    event: str
    job_id: uuid.UUID | None
    job: str | None
    created_at: datetime
    schedule_id: uuid.UUID | None = None
    schedule: str | None = None

    @property
    def words(self) -> str:
        """The rule as a sentence: "Tell On-call Slack when a service's … opens"."""
        what = EVENTS.get(self.event, self.event)
        only = f", only for the job {self.job}" if self.job else ""
        if self.schedule:
            only = f", only for the schedule {self.schedule}"
        return f"Tell {self.channel} when {what}{only}."


def _rule(row: dict[str, Any]) -> Rule:
    return Rule(row["id"], row["channel_id"], row["channel"], row["event"], row["job_id"],
                row["job"], row["created_at"], row["schedule_id"], row["schedule"])  # fmt: skip


def all_rules(conn: Conn) -> list[Rule]:
    return [_rule(r) for r in conn.execute(query("notify", "rules_list")).fetchall()]


def create(conn: Conn, *, channel_id: uuid.UUID, event: str, job: str | None = None,
           schedule: str | None = None, actor: str) -> Rule:  # fmt: skip
    if event not in EVENTS:
        raise RuleError("Choose when to send a message.", "event")
    job_id = None
    if job:
        if event not in FOR_JOB:
            raise RuleError("Only dead-letter rules can be narrowed to one job.", "job")
        try:
            job_id = job_definitions.get(conn, job)["id"]
        except UsageError:
            raise RuleError(f"No job is called {job}.", "job") from None
    schedule_id = None
    if schedule:
        if event not in FOR_SCHEDULE:
            raise RuleError("Only lag and dead man's switch rules can be narrowed to one "
                            "schedule.", "schedule")  # fmt: skip
        found = conn.execute(query("notify", "schedule_id_by_name"), {"name": schedule}).fetchone()
        if found is None:
            raise RuleError(f"No schedule is called {schedule}.", "schedule")
        schedule_id = found["id"]
    with conn.transaction():
        channel = channels.get(conn, channel_id)
        row = conn.execute(
            query("notify", "rule_insert"),
            {
                "channel_id": channel_id,
                "event": event,
                "job_id": job_id,
                "schedule_id": schedule_id,
                "actor": actor,
            },
        ).fetchone()
        assert row is not None
        audit.record(conn, actor, "notify.rule_create", "notification_rule", str(row["id"]),
                     after={"channel": channel.name, "event": event, "job": job,
                            "schedule": schedule},
                     subject_id=row["id"])  # fmt: skip
    return Rule(row["id"], channel_id, channel.name, event, job_id, job, row["created_at"],
                schedule_id, schedule)  # fmt: skip


def delete(conn: Conn, rule_id: uuid.UUID, *, actor: str) -> None:
    with conn.transaction():
        row = conn.execute(query("notify", "rule_delete"), {"id": rule_id}).fetchone()
        if row is None:
            raise UnknownRule("That rule no longer exists.")
        audit.record(conn, actor, "notify.rule_delete", "notification_rule", str(rule_id),
                     before={"channel_id": str(row["channel_id"]), "event": row["event"],
                             "job_id": None if row["job_id"] is None else str(row["job_id"]),
                             "schedule_id": None if row["schedule_id"] is None
                             else str(row["schedule_id"])},
                     subject_id=rule_id)  # fmt: skip
