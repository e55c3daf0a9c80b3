"""Named queues: a run waits in the queue its job definition or its submit names (`default`
unless given), and each worker claims from one queue. A queue can be paused fleet-wide:
no worker starts anything from it until it is resumed, and nothing in it is lost.

    pause(conn, "reports", actor="alice", note="the warehouse is being migrated")
    resume(conn, "reports", actor="alice")
    set_limits(conn, "reports", actor="alice", key_field="customer_id", key_max_running=1)
    [q.name for q in overview(conn)]   # every queue in use, with its depth and its pause
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import sqlalchemy as sa
from psycopg.types.json import Jsonb
from pydantic import Field

from app.core import fields, limits
from app.core.db import Conn
from app.core.errors import UsageError, about
from app.core.fields import Count, Duration, Fields, Name, column, moment
from app.core.sql import query
from app.people import audit
from app.runs import queue_limits

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
    max_running: Count | None = column(
        sa.Integer,
        nullable=True,
        default=None,
        description="At most this many of its runs running at once, fleet-wide (none: no limit).",
    )
    key_field: Name | None = column(
        sa.Text,
        nullable=True,
        default=None,
        description="The args field whose value is a run's key for key_max_running.",
    )
    key_max_running: Count | None = column(
        sa.Integer,
        nullable=True,
        default=None,
        description="At most this many runs of one key running at once, fleet-wide.",
    )
    rate_limit: Count | None = column(
        sa.Integer,
        nullable=True,
        default=None,
        description="At most this many of its runs start per rate_period_seconds, fleet-wide.",
    )
    rate_period_seconds: Duration | None = column(
        sa.Integer, nullable=True, default=None, description="The period of rate_limit."
    )
    rate_per_key: bool = column(
        sa.Boolean,
        default=False,
        server_default=sa.false(),
        description="The rate applies to each key (key_field) rather than the whole queue.",
    )
    rate_burst: Count | None = column(
        sa.Integer,
        nullable=True,
        default=None,
        description="How many may start at once after a quiet spell (1: evenly spaced).",
    )
    fair_share: bool = column(
        sa.Boolean,
        default=False,
        server_default=sa.false(),
        description="Its runs start key by key in turns (key_field), so that no key's "
        "backlog holds another key's runs up.",
    )
    key_weights: dict[str, int] = fields.json_object(
        "With fair_share: the keys that get more than one start per turn, and how many."
    )
    limits_by: str | None = column(sa.Text, nullable=True)
    limits_at: datetime | None = moment()


class QueueRow(QueueFields):
    """A queue as the Queues page, the API and the CLI show it: its settings, and what
    waits in it and runs from it."""

    pending: int = Field(description="Runs waiting, due or not.")
    due: int = Field(description="Runs waiting and due now.")
    running: int
    oldest_wait_seconds: float | None = Field(description="How long the oldest due run waited.")
    ended_per_minute: list[int] = Field(description="Runs ended per minute, oldest first.")


def limits_sentence(queue: QueueFields) -> str:
    """A queue's limits in a sentence: `at most 5 running, 1 per customer_id, 20 starts
    per 1 s; fair turns per tenant (weights: acme 3)`."""
    parts = []
    if queue.max_running is not None:
        parts.append(f"{queue.max_running} running")
    if queue.key_max_running is not None:
        parts.append(f"{queue.key_max_running} per {queue.key_field}")
    if queue.rate_limit is not None:
        burst = f" (bursts of {queue.rate_burst})" if (queue.rate_burst or 1) > 1 else ""
        each = f" for each {queue.key_field}" if queue.rate_per_key else ""
        starts = "start" if queue.rate_limit == 1 else "starts"
        parts.append(f"{queue.rate_limit} {starts} per {queue.rate_period_seconds} s{each}{burst}")
    sentence = ["at most " + ", ".join(parts)] if parts else []
    if queue.fair_share:
        weights = ", ".join(f"{k} {w}" for k, w in sorted(queue.key_weights.items()))
        sentence.append(f"fair turns per {queue.key_field}"
                        + (f" (weights: {weights})" if weights else ""))  # fmt: skip
    return "; ".join(sentence) or "no limits"


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


def set_limits(
    conn: Conn,
    name: str,
    *,
    actor: str,
    max_running: int | None = None,
    key_field: str | None = None,
    key_max_running: int | None = None,
    rate_limit: int | None = None,
    rate_period_seconds: int | None = None,
    rate_burst: int | None = None,
    rate_per_key: bool = False,
    fair_share: bool = False,
    key_weights: Mapping[str, int] | None = None,
    now: datetime | None = None,
) -> None:
    """Set queue `name`'s fleet-wide limits, replacing the ones it had (None: no limit): at
    most `max_running` of its runs running at once, at most `key_max_running` of one key
    (the value of a run's args field `key_field`), and at most `rate_limit` starts per
    `rate_period_seconds`, evenly spaced unless `rate_burst` lets that many start at once;
    with `rate_per_key`, that rate for each key. Runs over a limit wait, pending, attempt
    unspent. With `fair_share`, runs start key by key in turns, `key_weights[key]` of a
    key's per turn (1 unless listed), its own runs in priority order."""
    check_name(name)
    rate = _checked_rate(rate_limit, rate_period_seconds, rate_burst)
    with limits.refused_as(QueueError):
        if max_running is not None:
            with about("max_running"):
                max_running = fields.check_whole(Count, "the most running at once", max_running)
        if key_max_running is not None:
            with about("key_max_running"):
                key_max_running = fields.check_whole(
                    Count, "the most running at once per key", key_max_running
                )
        if key_field is not None:
            with about("key_field"):
                key_field = limits.check_name("the key field", key_field)
    for flag, value in (("rate_per_key", rate_per_key), ("fair_share", fair_share)):
        if not isinstance(value, bool):
            raise QueueError(f"{flag} must be true or false, got {value!r}", flag)
    weights = _checked_weights(key_weights or {})
    if weights and not fair_share:
        raise QueueError("weights apply to fair turns between keys (fair_share)", "key_weights")
    if rate_per_key and rate["rate_limit"] is None:
        raise QueueError("a rate for each key needs a rate (rate_limit)", "rate_limit")
    if (key_field is None) != (key_max_running is None and not rate_per_key and not fair_share):
        raise QueueError(
            "a limit per key needs both the input field that names a run's key and how "
            "many runs of one key may run at once (or a rate for each key, or fair turns)",
            "key_field" if key_field is None else "key_max_running",
        )
    after = {"max_running": max_running, "key_field": key_field,
             "key_max_running": key_max_running, **rate, "rate_per_key": rate_per_key,
             "fair_share": fair_share, "key_weights": weights}  # fmt: skip
    with conn.transaction():
        before = _setting(conn, name)
        # the bucket starts full: a new rate lets its burst start at once
        setting = {"name": name, "actor": actor, "now": now, "rate_tokens": rate["rate_burst"],
                   **after, "key_weights": Jsonb(weights)}  # fmt: skip
        conn.execute(query("queues", "queue_set_limits"), setting)
        audit.record(conn, actor, "queue.limits", "queue", name,
                     before={k: before[k] for k in after}, after=after, now=now)  # fmt: skip
    queue_limits.forget(name)


def prune_key_rates(conn: Conn, now: datetime | None = None) -> int:
    """Drop the key rate buckets that have refilled (a key without one has a full bucket):
    how many."""
    return conn.execute(query("queues", "queue_key_rates_prune"), {"now": now}).rowcount


def _checked_rate(
    rate_limit: int | None, rate_period_seconds: int | None, rate_burst: int | None
) -> dict[str, int | None]:
    """A rate limit's settings checked, its burst 1 unless given; all None without one."""
    if rate_limit is None:
        if rate_period_seconds is not None or rate_burst is not None:
            field = "rate_period_seconds" if rate_period_seconds is not None else "rate_burst"
            raise QueueError("a rate needs how many starts (rate_limit) in its period", field)
        return dict.fromkeys(RATE_FIELDS)
    with limits.refused_as(QueueError):
        with about("rate_limit"):
            rate_limit = fields.check_whole(Count, "the starts per period", rate_limit)
        with about("rate_period_seconds"):
            if rate_period_seconds is None:
                raise limits.LimitError("a rate needs its period in seconds (for 20 a second: 1)")
            rate_period_seconds = fields.check_whole(
                Duration, "the rate's period in seconds", rate_period_seconds
            )
        with about("rate_burst"):
            rate_burst = fields.check_whole(
                Count, "the burst", 1 if rate_burst is None else rate_burst
            )
    return {"rate_limit": rate_limit, "rate_period_seconds": rate_period_seconds,
            "rate_burst": rate_burst}  # fmt: skip


def _checked_weights(weights: Mapping[str, int]) -> dict[str, int]:
    """Fair share's weights per key, checked: at most MAX_WEIGHTS keys, each 1 to MAX_WEIGHT."""
    if not isinstance(weights, Mapping):
        raise QueueError("the weights must map keys to whole numbers", "key_weights")
    if len(weights) > MAX_WEIGHTS:
        raise QueueError(f"at most {MAX_WEIGHTS:,} keys may have a weight", "key_weights")
    checked = {}
    with limits.refused_as(QueueError), about("key_weights"):
        for key, weight in weights.items():
            key = limits.check_text("a weighted key", key, limits.MAX_KEY_LENGTH)
            checked[key] = limits.check_whole(f"the weight of {key!r}", weight, 1, MAX_WEIGHT)
    return checked


MAX_WEIGHT = 1000  # a key's starts per turn, with fair share
MAX_WEIGHTS = 1000  # keys with a weight of their own, per queue
RATE_FIELDS = ("rate_limit", "rate_period_seconds", "rate_burst")
LIMIT_FIELDS = ("max_running", "key_field", "key_max_running", *RATE_FIELDS, "rate_per_key",
                "fair_share", "key_weights")  # fmt: skip


def _setting(conn: Conn, name: str) -> dict[str, object]:
    row = conn.execute(query("queues", "queue_setting"), {"name": name, "now": None}).fetchone()
    if row is None:
        return {"paused": False, "note": None, **dict.fromkeys(LIMIT_FIELDS), "rate_per_key": False,
                "fair_share": False, "key_weights": {}}  # fmt: skip
    return {"paused": row["paused"], "note": row["paused_note"],
            **{f: row[f] for f in LIMIT_FIELDS}}  # fmt: skip


def overview(conn: Conn, now: datetime | None = None) -> list[QueueRow]:
    """Every queue in use (with runs waiting, running or ended lately, or settings), and
    `default`, by name."""
    rows = conn.execute(
        query("queues", "queue_overview"), {"minutes": THROUGHPUT_MINUTES, "now": now}
    )
    return [QueueRow.model_validate(row) for row in rows]
