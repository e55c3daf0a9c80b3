"""`sundial notify list|test`: the notification channels and rules, and a test message sent
through the outbox like any other (the reaper delivers it; both doors call `app.notify`)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.core.text import safe

DEFAULT_WAIT_SECONDS = 30.0
POLL_SECONDS = 0.5


def cmd_notify(args: argparse.Namespace, settings: Settings) -> int:
    from app.notify import channels, outbox, rules
    from app.people import audit

    with connect(resolve_database_url(settings), autocommit=True) as conn:
        if args.notify_command == "list":
            all_rules = rules.all_rules(conn)
            print("channel\taddress\tmessages a minute\trules")
            for c in channels.all_channels(conn):
                mine = "; ".join(r.words for r in all_rules if r.channel_id == c.id) or "none"
                print(f"{safe(c.name)}\t{safe(c.hint)}\t{c.per_minute}\t{safe(mine)}")
            return 0
        channel = channels.by_name(conn, args.channel)
        message_id = outbox.queue_test(conn, channel.id, actor=audit.cli_actor())
        print(f"test message {message_id} queued for {safe(channel.name)}")
        deadline = time.monotonic() + args.wait
        while True:
            row: dict[str, Any] | None = outbox.message(conn, message_id)
            if row is None:
                print("the channel was deleted meanwhile")
                return 1
            if row["status"] == "sent":
                print(f"delivered to {safe(channel.hint)}")
                return 0
            if row["status"] == "failed" or row["tries"]:
                print(
                    f"not delivered: {safe(row['last_error'] or 'refused')}"
                    + (" (it will be tried again)" if row["status"] == "pending" else "")
                )
                return 1
            if time.monotonic() >= deadline:
                print(
                    f"still waiting after {args.wait:g} s: is `sundial reaper` running? "
                    "The message stays queued and is sent when it runs."
                )
                return 1
            time.sleep(POLL_SECONDS)


def add_notify_commands(sub: Any) -> None:
    p = sub.add_parser(
        "notify",
        help="list the notification channels and rules, or send a test message",
        description="Channels and rules are managed on the dashboard's Notifications page. "
        "Messages go through an outbox that the reaper delivers.",
    )
    p.set_defaults(func=cmd_notify, process="notify")
    commands = p.add_subparsers(dest="notify_command", required=True)
    commands.add_parser("list", help="every channel (its address as a hint) and its rules")
    test = commands.add_parser(
        "test", help="queue a test message to a channel and wait for the reaper to send it"
    )
    test.add_argument("channel", help="the channel's name, e.g. 'On-call Slack'")
    test.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        help="seconds to wait for the outcome (default 30; 0: do not wait)",
    )
