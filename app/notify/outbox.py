"""The notification outbox: messages owed to channels, written when an event is seen and
delivered by the reaper, durable across restarts.

Purpose: tell people when it matters (a new group of dead letters, a service's circuit
breaker opening, a schedule starting later than its lag threshold, an expected fire that did
not run) without losing a message to a crash and without sending one twice.

Use: the reaper calls `detect` then `deliver` every pass (`Notifier.run_once`); the
dashboard's "Send a test" calls `queue_test`. Any number of reapers may run.

How it stays exactly-once, and the one window where it is not:
- `detect` writes one row per (channel, event key) under a UNIQUE constraint, so seeing
  the same event on every pass, in two reapers at once, or after a restart queues it once.
- `deliver` claims due rows with FOR UPDATE SKIP LOCKED, sends, and marks them sent in
  that same transaction, only after the send succeeded. A crash before the send leaves the
  row pending (sent later); a failed send counts a try and waits (full-jitter backoff, from
  `app.core.backoff`) until MAX_TRIES are spent, then the row is marked failed.
- The window: a process killed after the receiver took the message but before the commit
  leaves the row pending, and the next pass sends it again. Webhooks carry the row's id as
  `Idempotency-Key` (header) and `idempotency_key` (JSON field) so the receiver can drop
  that repeat; Slack and e-mail have no such key and may, in that window, show it twice.

Rate: a channel sends at most `per_minute` messages a minute. When more are due, the last
message of the minute groups the rest ("5 more messages: …") and marks them all sent with
it; when none are left this minute, they wait for the next.

Telemetry: a log line per message sent, retried or given up.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.core.backoff import full_jitter
from app.core.db import Conn
from app.core.sql import query
from app.notify import channels, rules, secrets, sender
from app.observability import lag_slo
from app.people import audit
from app.runs import dead_letters
from app.scheduling import schedule_rules

log = logging.getLogger(__name__)

CLAIM_BATCH = 100  # messages one delivery pass claims
MAX_TRIES = 8  # sends of one message before it is marked failed
BACKOFF_BASE_SECONDS = 10.0  # the first retry within 10 s, then 20, 40, … (full jitter)
BACKOFF_CAP_SECONDS = 3600.0
MIN_RETRY_SECONDS = 1.0
RATE_WINDOW_SECONDS = 60.0
LOG_SHOWN = 50
LOOK_BACK = timedelta(days=1)  # events older than this are never sent (a long outage)
BREAKERS_PER_PASS = 200
SCHEDULES_EVERY_SECONDS = 30.0
EVENT_WORDS = {
    "dead_letter": "New dead letters",
    "breaker_open": "Service paused",
    "lag": "Schedule late",
    "dead_man": "Schedule did not fire",
    "test": "Test message",
    "grouped": "Grouped",
}


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # a rules.EVENTS key
    key: str  # unique per event: the outbox's dedupe key
    title: str
    body: str
    at: datetime
    job_id: uuid.UUID | None = None
    schedule: str | None = None


@dataclass(frozen=True, slots=True)
class Delivery:
    """One row of a channel's delivery log."""

    id: int
    event: str
    title: str
    status: str
    tries: int
    next_try_at: datetime
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None
    sent_with: int | None

    @property
    def event_words(self) -> str:
        return EVENT_WORDS.get(self.event, self.event)

    @property
    def outcome(self) -> str:
        if self.status == "sent":
            if self.sent_with is not None:
                return f"Delivered, grouped with message {self.sent_with}"
            return "Delivered"
        if self.status == "failed":
            return f"Gave up after {self.tries} tries"
        if self.tries:
            return f"Failed {self.tries} {'time' if self.tries == 1 else 'times'}, trying again"
        return "Waiting to be sent"


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    queued: int = 0
    sent: int = 0
    retried: int = 0
    failed: int = 0


# --- detection ---------------------------------------------------------------------------


def dead_letter_events(conn: Conn, since: datetime, now: datetime | None) -> list[Event]:
    """Open dead-letter groups whose first failure (since their last resolution) is at or
    after `since`: a reopened group is a new event."""
    found = [g for g in dead_letters.groups(conn, now=now) if g.first_seen >= since]
    if not found:
        return []
    jobs = {
        r["id"]: r["job_id"]
        for r in conn.execute(
            query("notify", "runs_jobs"), {"ids": [g.sample_run_id for g in found]}
        ).fetchall()
    }
    events = []
    for g in found:
        what = f"{g.exception}: {g.message}" if g.exception else g.message
        runs = "1 run" if g.runs == 1 else f"{g.runs} runs"
        events.append(
            Event(
                "dead_letter",
                f"dead_letter:{g.fingerprint}:{g.first_seen.isoformat()}",
                f"New dead letters: {what}"[:200],
                f"{runs} of {g.handler} failed for good with a new error: {g.sample_error}"
                f"\nExample: run {g.sample_run_id}. Open Dead letters in Sundial to retry "
                "or resolve them."[:2000],
                g.first_seen,
                jobs.get(g.sample_run_id),
            )
        )
    return events


def breaker_events(conn: Conn, since: datetime) -> list[Event]:
    """Circuit breakers that opened at or after `since` (their audited changes)."""
    rows = conn.execute(
        query("notify", "breaker_opened_since"), {"since": since, "limit": BREAKERS_PER_PASS}
    ).fetchall()
    events = []
    for r in rows:
        reason = ((r["details"] or {}).get("after") or {}).get("reason") or "too many failures"
        events.append(
            Event(
                "breaker_open",
                f"breaker_open:{r['id']}",
                f"Service paused: {r['service']}",
                f"Calls to {r['service']} are paused ({reason}). Runs that call it wait "
                "instead of failing until it recovers; see Queues in Sundial.",
                r["at"],
            )
        )
    return events


def schedule_events(conn: Conn, now: datetime | None) -> list[Event]:
    """The lag SLO's alerts (`app.observability.lag_slo`): a schedule over its threshold,
    an expected fire that produced no run, a schedule the trigger has not fired."""
    at = schedule_rules.db_now(conn, now)
    events = []
    for alert in lag_slo.report(conn, now=now).alerts:
        moment = alert.at or at
        kind = "lag" if alert.kind == "lag" else "dead_man"
        title = (f"Schedule late: {alert.schedule}" if kind == "lag"
                 else f"Schedule did not fire: {alert.schedule}")  # fmt: skip
        events.append(
            Event(
                kind,
                f"{kind}:{alert.schedule}:{moment.isoformat()}",
                title,
                f"The schedule {alert.schedule} {alert.text} (the fire of "
                f"{moment:%Y-%m-%d %H:%M} UTC). See Lag in Sundial.",
                moment,
                schedule=alert.schedule,
            )
        )
    return events


def detect(conn: Conn, now: datetime | None = None, *, schedules: bool = True) -> int:
    """Queue a message for every rule and every event it covers seen since the rule was
    made (and at most LOOK_BACK ago); already queued events are left alone. `schedules`:
    also read the lag SLO's alerts (a heavier read the reaper makes less often). The count
    queued."""
    all_rules = rules.all_rules(conn)
    if not all_rules:
        return 0
    at = schedule_rules.db_now(conn, now)
    floor = at - LOOK_BACK
    found: dict[str, list[Event]] = {}
    kinds = {r.event for r in all_rules}
    oldest = max(floor, min(r.created_at for r in all_rules))
    if "dead_letter" in kinds:
        found["dead_letter"] = dead_letter_events(conn, oldest, now)
    if "breaker_open" in kinds:
        found["breaker_open"] = breaker_events(conn, oldest)
    if schedules and kinds & {"lag", "dead_man"}:
        for event in schedule_events(conn, now):
            found.setdefault(event.kind, []).append(event)
    queued = 0
    for rule in all_rules:
        for event in found.get(rule.event, []):
            if event.at < rule.created_at or event.at < floor:
                continue
            if rule.job_id is not None and event.job_id != rule.job_id:
                continue
            if rule.schedule is not None and event.schedule != rule.schedule:
                continue
            queued += _queue(conn, rule.channel_id, rule.id, event, now)
    return queued


def _queue(conn: Conn, channel_id: uuid.UUID, rule_id: uuid.UUID | None, event: Event,
           now: datetime | None) -> int:  # fmt: skip
    row = conn.execute(
        query("notify", "outbox_insert"),
        {"channel_id": channel_id, "rule_id": rule_id, "event": event.kind,
         "event_key": event.key, "title": event.title, "body": event.body, "now": now},
    ).fetchone()  # fmt: skip
    return 0 if row is None else 1


def queue_test(conn: Conn, channel_id: uuid.UUID, *, actor: str,
               now: datetime | None = None) -> int:  # fmt: skip
    """Queue a test message to a channel, through the outbox like any other; its row id."""
    with conn.transaction():
        channel = channels.get(conn, channel_id)
        key = f"test:{uuid.uuid4()}"
        row = conn.execute(
            query("notify", "outbox_insert"),
            {"channel_id": channel_id, "rule_id": None, "event": "test", "event_key": key,
             "title": "Test message from Sundial",
             "body": f"If you can read this, the channel {channel.name} works. "
                     f"Sent at the request of {actor}.",
             "now": now},
        ).fetchone()  # fmt: skip
        assert row is not None
        audit.record(conn, actor, "notify.test", "notification_channel", channel.name,
                     after={"message": row["id"]}, subject_id=channel_id)  # fmt: skip
    return int(row["id"])


# --- delivery ----------------------------------------------------------------------------


def deliver(
    conn: Conn,
    secret_key: str,
    *,
    now: datetime | None = None,
    send: sender.Send = sender.send,
    limit: int = CLAIM_BATCH,
) -> DeliveryReport:
    """One delivery pass: claim the due messages, send them, mark each in the claiming
    transaction (sent, or retried later, or failed)."""
    sent = retried = failed = 0
    with conn.transaction():
        due = conn.execute(
            query("notify", "outbox_claim_due"), {"now": now, "limit": limit}
        ).fetchall()
        if not due:
            return DeliveryReport()
        ids = list({r["channel_id"] for r in due})
        stored = {
            r["id"]: r
            for r in conn.execute(query("notify", "channel_secrets"), {"ids": ids}).fetchall()
        }
        recent = {
            r["channel_id"]: r["sent"]
            for r in conn.execute(
                query("notify", "outbox_sent_recently"), {"ids": ids, "now": now}
            ).fetchall()
        }
        by_channel: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for r in due:
            by_channel.setdefault(r["channel_id"], []).append(r)
        for channel_id, messages in by_channel.items():
            channel = stored[channel_id]
            budget = channel["per_minute"] - recent.get(channel_id, 0)
            if budget <= 0:
                _postpone(conn, messages, RATE_WINDOW_SECONDS, now)
                continue
            try:
                url = secrets.decrypt(secret_key, channel["secret"])
            except secrets.UnreadableSecret as exc:
                gave_up = _failed(conn, messages, str(exc), now)
                failed += gave_up
                retried += len(messages) - gave_up
                continue
            singles, rest = (messages, []) if len(messages) <= budget else (
                messages[: budget - 1], messages[budget - 1 :])  # fmt: skip
            batches: list[list[dict[str, Any]]] = [[m] for m in singles]
            if rest:
                batches.append(rest)
            for i, batch in enumerate(batches):
                head = batch[0]
                title, body = (head["title"], head["body"]) if len(batch) == 1 else _grouped(batch)
                error = send(url, title, body, str(head["id"]))
                if error is None:
                    _mark_sent(conn, batch, now)
                    sent += len(batch)
                    log.info("sent notification %d to %s: %s", head["id"], channel["name"],
                             title, extra={"notification": head["id"]})  # fmt: skip
                    continue
                # The channel refused: this batch spends a try, the rest of the channel's
                # messages wait as long without spending one.
                gave_up = _failed(conn, batch, error, now)
                failed += gave_up
                retried += len(batch) - gave_up
                later = [m for b in batches[i + 1 :] for m in b]
                if later:
                    _postpone(conn, later, _delay(head["tries"]), now)
                log.warning("notification %d to %s failed: %s", head["id"], channel["name"],
                            error, extra={"notification": head["id"]})  # fmt: skip
                break
    return DeliveryReport(sent=sent, retried=retried, failed=failed)


def _grouped(batch: list[dict[str, Any]]) -> tuple[str, str]:
    kinds = {m["event"] for m in batch}
    if kinds == {"dead_letter"}:
        what = "new dead-letter groups"
    elif kinds == {"breaker_open"}:
        what = "services paused"
    else:
        what = "messages"
    title = f"{len(batch)} more {what} from Sundial"
    lines = [f"- {m['title']}" for m in batch[:20]]
    if len(batch) > 20:
        lines.append(f"- and {len(batch) - 20} more")
    return title, "More than this channel's messages a minute were due:\n" + "\n".join(lines)


def _mark_sent(conn: Conn, batch: list[dict[str, Any]], now: datetime | None) -> None:
    head, others = batch[0], batch[1:]
    conn.execute(query("notify", "outbox_mark_sent"),
                 {"ids": [head["id"]], "sent_with": None, "now": now})  # fmt: skip
    if others:
        conn.execute(query("notify", "outbox_mark_sent"),
                     {"ids": [m["id"] for m in others], "sent_with": head["id"],
                      "now": now})  # fmt: skip


def _delay(tries: int) -> float:
    return max(MIN_RETRY_SECONDS, full_jitter(tries, BACKOFF_BASE_SECONDS, BACKOFF_CAP_SECONDS))


def _failed(conn: Conn, batch: list[dict[str, Any]], error: str, now: datetime | None) -> int:
    """Spend a try on each message; the count of those that gave up (tries spent)."""
    for m in batch:
        conn.execute(
            query("notify", "outbox_mark_retry"),
            {"ids": [m["id"]], "error": error, "max_tries": MAX_TRIES,
             "delay": _delay(m["tries"]), "now": now},
        )  # fmt: skip
    return sum(1 for m in batch if m["tries"] + 1 >= MAX_TRIES)


def _postpone(conn: Conn, batch: list[dict[str, Any]], seconds: float,
              now: datetime | None) -> None:  # fmt: skip
    conn.execute(query("notify", "outbox_postpone"),
                 {"ids": [m["id"] for m in batch], "delay": seconds, "now": now})  # fmt: skip


def prune(conn: Conn, before: datetime, limit: int) -> int:
    """Delete up to `limit` sent or failed messages made before `before`; the count."""
    return conn.execute(
        query("notify", "outbox_prune"), {"before": before, "limit": limit}
    ).rowcount


# --- reads -------------------------------------------------------------------------------


def log_of(conn: Conn, channel_id: uuid.UUID, limit: int = LOG_SHOWN) -> list[Delivery]:
    rows = conn.execute(
        query("notify", "outbox_of_channel"), {"channel_id": channel_id, "limit": limit}
    ).fetchall()
    return [Delivery(**r) for r in rows]


def message(conn: Conn, message_id: int) -> dict[str, Any] | None:
    row: dict[str, Any] | None = conn.execute(
        query("notify", "outbox_by_id"), {"id": message_id}
    ).fetchone()
    return row


class Notifier:
    """The reaper's notification step: detect, then deliver. The schedules' alerts are
    read every SCHEDULES_EVERY_SECONDS (the lag report reads a day of fires)."""

    def __init__(self, secret_key: str) -> None:
        self.secret_key = secret_key
        self._schedules_read: float | None = None  # monotonic time of the last read

    def run_once(self, conn: Conn, now: datetime | None = None) -> DeliveryReport:
        clock = time.monotonic()
        read = (now is not None or self._schedules_read is None
                or clock - self._schedules_read >= SCHEDULES_EVERY_SECONDS)  # fmt: skip
        if read:
            self._schedules_read = clock
        queued = detect(conn, now, schedules=read)
        report = deliver(conn, self.secret_key, now=now)
        return DeliveryReport(queued, report.sent, report.retried, report.failed)
