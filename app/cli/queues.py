"""`sundial queue list|pause|resume|limit`: named queues from the shell (operators' business, like
the dashboard's Queues page; both call `app.runs.queues`)."""

from __future__ import annotations

import argparse
from typing import Any

from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.core.text import safe


def cmd_queue(args: argparse.Namespace, settings: Settings) -> int:
    from app.people import audit
    from app.runs import queues

    with connect(resolve_database_url(settings), autocommit=True) as conn:
        if args.queue_command == "pause":
            queues.pause(conn, args.name, actor=audit.cli_actor(), note=args.note)
            print(f"queue {args.name!r} paused: workers start nothing from it until resumed")
        elif args.queue_command == "resume":
            queues.resume(conn, args.name, actor=audit.cli_actor())
            print(f"queue {args.name!r} resumed")
        elif args.queue_command == "limit":
            given = (args.max_running, args.key_field, args.per_key, args.rate,
                     args.per_seconds, args.burst, args.rate_per_key or None,
                     args.fair_share or None, args.weight)  # fmt: skip
            if args.none == any(v is not None for v in given):
                raise queues.QueueError(
                    "give the limits (--max-running, --key-field with --per-key or "
                    "--fair-share, --rate with --per-seconds), or --none to remove them"
                )
            queues.set_limits(conn, args.name, actor=audit.cli_actor(),
                              max_running=args.max_running, key_field=args.key_field,
                              key_max_running=args.per_key, rate_limit=args.rate,
                              rate_period_seconds=args.per_seconds,
                              rate_burst=args.burst, rate_per_key=args.rate_per_key,
                              fair_share=args.fair_share,
                              key_weights=_weights(args.weight or []))  # fmt: skip
            (q,) = [q for q in queues.overview(conn) if q.name == args.name]
            print(f"queue {args.name!r}: {queues.limits_sentence(q)}")
        else:
            print("queue\tpending\tdue\trunning\toldest wait\tended (last 15 min)\tstate"
                  "\tlimits")  # fmt: skip
            for q in queues.overview(conn):
                wait = f"{q.oldest_wait_seconds:.1f}s" if q.oldest_wait_seconds else "-"
                state = (f"paused by {safe(q.paused_by or '?')}"
                         + (f": {safe(q.paused_note)}" if q.paused_note else "")
                         if q.paused else "open")  # fmt: skip
                print(f"{safe(q.name)}\t{q.pending}\t{q.due}\t{q.running}\t{wait}\t"
                      f"{sum(q.ended_per_minute)}\t{state}\t"
                      f"{safe(queues.limits_sentence(q))}")  # fmt: skip
    return 0


def add_queue_commands(sub: Any) -> None:
    p = sub.add_parser(
        "queue",
        help="list, pause, resume or limit named queues",
        description="Runs wait in named queues (default unless a job or submit names "
        "another); each worker serves the queues it is started with (--queues). A paused "
        "queue starts nothing anywhere in the fleet and loses nothing.",
    )
    p.set_defaults(func=cmd_queue, process="queue")
    commands = p.add_subparsers(dest="queue_command", required=True)
    commands.add_parser("list", help="every queue in use: depth, running, waits, state")
    pause = commands.add_parser("pause", help="stop every worker starting runs from a queue")
    pause.add_argument("name", help="the queue")
    pause.add_argument("--note", help="why, shown with the pause")
    resume = commands.add_parser("resume", help="let workers start runs from a queue again")
    resume.add_argument("name", help="the queue")
    limit = commands.add_parser(
        "limit",
        help="set how many of a queue's runs may run at once, or start per period",
        description="Set a queue's concurrency and rate limits, replacing the ones it had. "
        "Runs over a limit wait (pending, no attempt spent); other keys' runs go ahead of "
        "them. A rate spaces starts evenly (--burst lets more start at once).",
    )
    limit.add_argument("name", help="the queue")
    limit.add_argument("--max-running", type=int, help="at most this many running at once")
    limit.add_argument(
        "--key-field", help="the args field whose value is a run's key (e.g. customer_id)"
    )
    limit.add_argument("--per-key", type=int, help="at most this many of one key at once")
    limit.add_argument("--rate", type=int, help="at most this many starts per --per-seconds")
    limit.add_argument("--per-seconds", type=int, help="the rate's period (for 20 a second: 1)")
    limit.add_argument(
        "--burst", type=int, help="how many may start at once after a quiet spell (default 1)"
    )
    limit.add_argument(
        "--rate-per-key",
        action="store_true",
        help="the rate applies to each key (--key-field) rather than the whole queue",
    )
    limit.add_argument(
        "--fair-share",
        action="store_true",
        help="start runs key by key in turns (--key-field), so that no key's backlog holds "
        "another's runs up",
    )
    limit.add_argument(
        "--weight",
        action="append",
        metavar="KEY=N",
        help="with --fair-share: N starts per turn for KEY (1 unless given); repeat for more",
    )
    limit.add_argument("--none", action="store_true", help="remove the queue's limits")


def _weights(given: list[str]) -> dict[str, int]:
    """`--weight acme=3 --weight globex=2` as {"acme": 3, "globex": 2}."""
    from app.runs.queues import QueueError

    weights = {}
    for item in given:
        key, sep, number = item.rpartition("=")
        if not sep or not key or not number.strip().isdigit():
            raise QueueError(f"--weight takes KEY=N with N a whole number, got {item!r}")
        weights[key] = int(number)
    return weights
