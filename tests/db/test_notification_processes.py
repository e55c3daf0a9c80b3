"""Notifications across real processes and a real HTTP receiver: an event that happened
while a web process ran (then killed), queued by a reaper that was then killed (SIGKILL), is
delivered by the next reaper exactly once, and a
reaper killed while the receiver holds the message re-sends it with the same idempotency
key (the one window the outbox documents)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import psycopg

from app.notify import channels, rules
from tests.helpers.commands import free_port, run_sundial, wait_for_http
from tests.helpers.dead_letters import dead_letter, declined
from tests.helpers.processes import query, services
from tests.helpers.receiver import receiver
from tests.helpers.waits import wait_until

KEY = "process-test-secret-key"


def _outbox(db_url: str) -> list[dict[str, Any]]:
    return query(db_url, "SELECT id, status, tries FROM notification_outbox ORDER BY id")


def _webhook(conn: psycopg.Connection[Any], url: str) -> None:
    channel = channels.create(conn, KEY, name="hooks", kind="webhook", fields={"url": url},
                              actor="alice")  # fmt: skip
    rules.create(conn, channel_id=channel.id, event="dead_letter", actor="alice")


def test_an_event_queued_before_a_reaper_is_killed_is_delivered_once_after_restart(
    conn: psycopg.Connection[Any], db_url: str, tmp_path: Path
) -> None:
    with receiver(answers=[503]) as hook, services(db_url, tmp_path) as start:
        _webhook(conn, hook.url)
        port = free_port()
        web = start("web", "--host", "127.0.0.1", "--port", str(port), SECRET_KEY=KEY)
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=90, proc=web.proc)
        declined(conn, 1)
        web.signal(signal.SIGKILL)  # the web plays no part in delivery: killing it loses nothing
        web.proc.wait(10)
        first = start("reaper", SECRET_KEY=KEY)
        # it queues the event and tries once; the receiver is down (503): not delivered
        wait_until(lambda: [r["tries"] for r in _outbox(db_url)] == [1], "a first try", 90)
        first.signal(signal.SIGKILL)
        first.proc.wait(10)
        (row,) = _outbox(db_url)
        assert row["status"] == "pending" and hook.count() == 1
        second = start("reaper", SECRET_KEY=KEY)
        wait_until(lambda: _outbox(db_url)[0]["status"] == "sent", "the delivery", 90)
        assert hook.keys() == [str(row["id"])] * 2  # the refused try, then the delivery
        # a new group is sent once; the first event never again, pass after pass
        dead_letter(conn, "TimeoutError: the bank did not answer")
        wait_until(lambda: [r["status"] for r in _outbox(db_url)] == ["sent", "sent"],
                   "the second event", 90)  # fmt: skip
        second.wait_for_log("sent notification")
        passes = second.log().count("sent notification")
        wait_until(lambda: hook.count() >= 3, "the second delivery")
        assert hook.count() == 3
        assert sorted(set(hook.keys())) == sorted(str(r["id"]) for r in _outbox(db_url))
        assert passes == 2


def test_a_reaper_killed_while_the_receiver_holds_the_message_sends_it_again_same_key(
    conn: psycopg.Connection[Any], db_url: str, tmp_path: Path
) -> None:
    with receiver(delay_first=5.0) as hook, services(db_url, tmp_path) as start:
        _webhook(conn, hook.url)
        declined(conn, 1)
        first = start("reaper", SECRET_KEY=KEY)
        wait_until(lambda: hook.count() == 1, "the message to arrive", 90)
        first.signal(signal.SIGKILL)  # the receiver has it; the reaper never commits
        first.proc.wait(10)
        assert [r["status"] for r in _outbox(db_url)] == ["pending"]
        start("reaper", SECRET_KEY=KEY)
        wait_until(lambda: [r["status"] for r in _outbox(db_url)] == ["sent"], "the re-send", 90)
        (row,) = _outbox(db_url)
        assert hook.keys() == [str(row["id"])] * 2  # a repeat the receiver can drop by key


def test_sundial_notify_test_waits_for_the_reaper_and_says_the_outcome(
    conn: psycopg.Connection[Any], db_url: str, tmp_path: Path
) -> None:
    with receiver(answers=[500]) as hook, services(db_url, tmp_path) as start:
        _webhook(conn, hook.url)
        unknown = run_sundial(db_url, "notify", "test", "nope", "--wait", "0")
        assert (unknown.returncode, unknown.stderr.strip()) == (
            2, "sundial notify: error: No channel is called nope."
        )  # fmt: skip
        channels.create(conn, KEY, name="elsewhere", kind="webhook",
                        fields={"url": "http://127.0.0.1:9/"}, actor="alice")  # fmt: skip
        alone = run_sundial(db_url, "notify", "test", "elsewhere", "--wait", "0")
        assert alone.returncode == 1 and "is `sundial reaper` running?" in alone.stdout
        start("reaper", SECRET_KEY=KEY)
        refused = run_sundial(db_url, "notify", "test", "hooks", "--wait", "60", SECRET_KEY=KEY)
        assert refused.returncode == 1, refused.stdout
        assert "not delivered:" in refused.stdout and "500" in refused.stdout
        sent = run_sundial(db_url, "notify", "test", "hooks", "--wait", "60", SECRET_KEY=KEY)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        assert "delivered to Webhook http://127.0.0.1:" in sent.stdout
        listed = run_sundial(db_url, "notify", "list")
        assert "hooks\tWebhook http://127.0.0.1:" in listed.stdout
        assert "Tell hooks when a new group of dead letters" in listed.stdout
