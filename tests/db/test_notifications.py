"""Notifications against a real PostgreSQL and a real HTTP receiver: channels keep their
address encrypted, rules queue each event once, the delivery pass sends, retries with
backoff, gives up, and groups what goes over a channel's rate."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from app.catalog import job_definitions
from app.catalog.job_fields import JobSpec
from app.core.config import Settings
from app.core.db import Conn
from app.core.errors import Conflict
from app.notify import channels, outbox, rules, secrets
from app.observability import lag_slo
from app.runs import breakers, transitions
from app.services.reaper import Reaper
from app.services.trigger import Trigger
from tests.helpers.dead_letters import declined
from tests.helpers.receiver import receiver
from tests.helpers.schedules import add, settings
from tests.helpers.waits import db_now

KEY = "test-secret-key"


def _webhook(conn: Conn, url: str, name: str = "hooks", per_minute: int | None = None) -> Any:
    return channels.create(conn, KEY, name=name, kind="webhook", fields={"url": url},
                           per_minute=per_minute, actor="alice")  # fmt: skip


def _rows(conn: Conn, channel_id: Any) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT id, status, tries, last_error, next_try_at, sent_with FROM notification_outbox"
        " WHERE channel_id = %s ORDER BY id",
        (channel_id,),
    ).fetchall()


def test_the_address_is_stored_encrypted_and_shown_only_as_a_hint(conn: Conn) -> None:
    url = "https://hooks.example.com/services/very-secret-token?sig=abc123"
    channel = _webhook(conn, url)
    (row,) = conn.execute("SELECT * FROM notification_channels").fetchall()
    stored = " ".join(str(v) for v in row.values())
    for secret in ("very-secret-token", "abc123", "hooks.example.com/services"):
        assert secret not in stored
    assert channel.hint == "Webhook https://hooks.example.com/…••••"
    assert secrets.decrypt(KEY, row["secret"]).startswith("jsons://hooks.example.com/services/")
    with pytest.raises(secrets.UnreadableSecret, match="SECRET_KEY changed"):
        secrets.decrypt("another-key", row["secret"])
    audited = conn.execute("SELECT details::text AS d FROM audit_log").fetchall()
    assert audited and all("very-secret-token" not in a["d"] for a in audited)


def test_slack_and_email_addresses_and_refusals_in_words(conn: Conn) -> None:
    slack = channels.create(
        conn, KEY, name="On-call Slack", kind="slack",
        fields={"url": "https://hooks.slack.com/services/T0/B0/XXXXSECRET"}, actor="alice",
    )  # fmt: skip
    assert slack.hint == "Slack webhook …/T0/B0/••••"
    mail = channels.create(
        conn, KEY, name="Mail", kind="email", actor="alice",
        fields={"host": "smtp.example.com", "port": "587", "user": "u", "password": "pw!",
                "sender": "sundial@example.com", "to": "oncall@example.com"},
    )  # fmt: skip
    assert mail.hint == "E-mail to oncall@example.com through smtp.example.com:587"
    with pytest.raises(channels.ChannelError, match="Slack incoming-webhook") as refused:
        channels.create(conn, KEY, name="x", kind="slack", fields={"url": "https://x.com/a"},
                        actor="alice")  # fmt: skip
    assert refused.value.field == "url"
    with pytest.raises(Conflict, match="already called On-call Slack"):
        _webhook(conn, "https://example.com/h", name="On-call Slack")


def test_a_new_dead_letter_group_is_delivered_once_with_its_idempotency_key(conn: Conn) -> None:
    with receiver() as hook:
        channel = _webhook(conn, hook.url)
        rules.create(conn, channel_id=channel.id, event="dead_letter", actor="alice")
        declined(conn, 1)
        assert outbox.detect(conn) == 1
        assert outbox.detect(conn) == 0  # seen again: already queued
        report = outbox.deliver(conn, KEY)
        assert report.sent == 1
        assert outbox.deliver(conn, KEY).sent == 0
        assert hook.count() == 1
        (row,) = _rows(conn, channel.id)
        post = hook.posts[0]
        assert post.headers["Idempotency-Key"] == str(row["id"])
        assert post.body["idempotency_key"] == str(row["id"])
        assert "PaymentDeclined" in post.body["title"]
        declined(conn, 2)  # the same group again: no new message
        assert outbox.detect(conn) == 0
        (entry,) = outbox.log_of(conn, channel.id)
        assert (entry.event_words, entry.outcome) == ("New dead letters", "Delivered")


def test_events_before_the_rule_and_other_jobs_are_not_sent(conn: Conn) -> None:
    declined(conn, 1)
    channel = _webhook(conn, "http://127.0.0.1:9/none")
    rules.create(conn, channel_id=channel.id, event="dead_letter", actor="alice")
    assert outbox.detect(conn) == 0
    with pytest.raises(rules.RuleError, match="No job is called nightly"):
        rules.create(conn, channel_id=channel.id, event="dead_letter", job="nightly",
                     actor="alice")  # fmt: skip


def test_a_breaker_opening_is_queued_from_its_audited_change(conn: Conn) -> None:
    with receiver() as hook:
        channel = _webhook(conn, hook.url)
        rule = rules.create(conn, channel_id=channel.id, event="breaker_open", actor="alice")
        assert rule.words.startswith("Tell hooks when a service's circuit breaker opens")
        spec = JobSpec.model_construct(name="charge", handler="noop", dependencies=["payments"])
        job_definitions.create(conn, spec, actor="alice")
        breakers.open_by_hand(conn, "payments", actor="bob", note="the bank is down")
        assert outbox.detect(conn) == 1
        assert outbox.deliver(conn, KEY).sent == 1
        assert hook.posts[0].body["title"] == "Service paused: payments"
        assert "the bank is down" in hook.posts[0].body["message"]


def test_a_refused_message_is_retried_with_backoff_then_delivered(conn: Conn) -> None:
    with receiver(answers=[500]) as hook:
        channel = _webhook(conn, hook.url)
        queued = outbox.queue_test(conn, channel.id, actor="alice")
        t0 = db_now(conn)
        assert outbox.deliver(conn, KEY, now=t0).retried == 1
        (row,) = _rows(conn, channel.id)
        assert (row["status"], row["tries"]) == ("pending", 1)
        assert "500" in row["last_error"]
        assert t0 < row["next_try_at"] <= t0 + timedelta(seconds=outbox.BACKOFF_BASE_SECONDS * 2)
        assert outbox.deliver(conn, KEY, now=t0).sent == 0  # not due yet: nothing sent
        assert hook.count() == 1
        assert outbox.deliver(conn, KEY, now=t0 + timedelta(minutes=5)).sent == 1
        assert hook.count() == 2
        assert hook.keys() == [str(queued), str(queued)]
        (row,) = _rows(conn, channel.id)
        assert (row["status"], row["tries"], row["last_error"]) == ("sent", 2, None)


def test_a_message_refused_every_time_is_given_up_after_the_tries(conn: Conn) -> None:
    with receiver(answers=[500] * outbox.MAX_TRIES) as hook:
        channel = _webhook(conn, hook.url)
        outbox.queue_test(conn, channel.id, actor="alice")
        at = db_now(conn)
        for _ in range(outbox.MAX_TRIES):
            at += timedelta(hours=2)
            outbox.deliver(conn, KEY, now=at)
        (row,) = _rows(conn, channel.id)
        assert (row["status"], row["tries"]) == ("failed", outbox.MAX_TRIES)
        assert outbox.deliver(conn, KEY, now=at + timedelta(days=1)).sent == 0
        assert hook.count() == outbox.MAX_TRIES
        (entry,) = outbox.log_of(conn, channel.id)
        assert entry.outcome == f"Gave up after {outbox.MAX_TRIES} tries"


def test_over_the_rate_the_rest_go_as_one_grouped_message(conn: Conn) -> None:
    with receiver() as hook:
        channel = _webhook(conn, hook.url, per_minute=2)
        for _ in range(5):
            outbox.queue_test(conn, channel.id, actor="alice")
        assert outbox.deliver(conn, KEY).sent == 5
        assert hook.count() == 2
        assert hook.posts[1].body["title"] == "4 more messages from Sundial"
        rows = _rows(conn, channel.id)
        assert {r["status"] for r in rows} == {"sent"}
        assert [r["sent_with"] for r in rows] == [None, None, *[rows[1]["id"]] * 3]
        outbox.queue_test(conn, channel.id, actor="alice")
        assert outbox.deliver(conn, KEY).sent == 0  # two sent this minute: it waits
        assert hook.count() == 2


def test_a_late_schedule_and_a_missed_fire_are_sent_to_their_rules(conn: Conn) -> None:
    start = db_now(conn)
    add(conn, "every minute", now=start, cron="* * * * *")
    add(conn, "other", now=start, cron="0 3 * * *")
    lag_slo.set_threshold(conn, "every minute", 60, actor="alice")
    with receiver() as hook:
        channel = _webhook(conn, hook.url)
        rules.create(conn, channel_id=channel.id, event="lag", schedule="every minute",
                     actor="alice")  # fmt: skip
        rules.create(conn, channel_id=channel.id, event="dead_man", schedule="every minute",
                     actor="alice")  # fmt: skip
        with pytest.raises(rules.RuleError, match="No schedule is called nightly"):
            rules.create(conn, channel_id=channel.id, event="lag", schedule="nightly",
                         actor="alice")  # fmt: skip
        minute = timedelta(minutes=1)
        fires = [start.replace(second=0, microsecond=0) + minute * (i + 1) for i in range(4)]
        trigger = Trigger(settings(), holder="t")
        for i in (0, 3):  # the trigger is down for fires 1 and 2
            trigger.run_once(conn, now=fires[i] + timedelta(seconds=1))
            (_job,) = transitions.claim(conn, "w", 1, 30, now=fires[i] + timedelta(seconds=90))
        now = fires[3] + timedelta(seconds=100)
        assert outbox.detect(conn, now) == 3  # late at fires[3]; fires 1 and 2 missed
        assert outbox.detect(conn, now) == 0
        assert outbox.deliver(conn, KEY, now=now).sent == 3
        titles = sorted(p.body["title"] for p in hook.posts)
        assert titles == ["Schedule did not fire: every minute"] * 2 + [
            "Schedule late: every minute"
        ]
        assert outbox.detect(conn, now, schedules=False) == 0


def test_the_reaper_prunes_sent_messages_with_the_runs_and_keeps_pending_ones(conn: Conn) -> None:
    with receiver() as hook:
        channel = _webhook(conn, hook.url)
        outbox.queue_test(conn, channel.id, actor="alice")
        assert outbox.deliver(conn, KEY).sent == 1
        waiting = outbox.queue_test(conn, channel.id, actor="alice")
        reaper = Reaper(Settings.from_env({"SECRET_KEY": KEY}))  # keeps runs 30 days
        assert reaper.prune(conn, db_now(conn) + timedelta(days=29)).notifications == 0
        assert reaper.prune(conn, db_now(conn) + timedelta(days=31)).notifications == 1
        assert [r["id"] for r in _rows(conn, channel.id)] == [waiting]
