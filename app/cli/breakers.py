"""`sundial breaker list|set|open|close`: the circuit breakers of the services job
definitions call (operators' business, like the Services part of the Queues page; both call
`app.runs.breakers`)."""

from __future__ import annotations

import argparse
from typing import Any

from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.core.text import safe

SETTING_OPTIONS = {  # option -> the setting it sets
    "threshold": "failure_threshold",
    "min_calls": "min_calls",
    "window": "window_seconds",
    "cool_off": "cool_off_seconds",
    "probes": "probes",
    "retry_budget": "retry_budget",
    "retry_window": "retry_window_seconds",
}


def cmd_breaker(args: argparse.Namespace, settings: Settings) -> int:
    from app.people import audit
    from app.runs import breakers

    with connect(resolve_database_url(settings), autocommit=True) as conn:
        if args.breaker_command == "open":
            breakers.open_by_hand(conn, args.name, actor=audit.cli_actor(), note=args.note)
            print(f"{args.name}: breaker open, its runs wait until it is closed by hand")
        elif args.breaker_command == "close":
            breakers.close_by_hand(conn, args.name, actor=audit.cli_actor(), note=args.note)
            print(f"{args.name}: breaker closed, its runs go")
        elif args.breaker_command == "set":
            given = {setting: getattr(args, option) for option, setting in SETTING_OPTIONS.items()}
            breakers.set_settings(conn, args.name, actor=audit.cli_actor(), **given)
            (b,) = [b for b in breakers.overview(conn) if b.name == args.name]
            print(f"{args.name}: {settings_sentence(b)}")
        else:
            print("service\tstate\tsince\tcalls failed (window)\tretries\tsettings")
            for b in breakers.overview(conn):
                state = b.state.value.replace("_", "-") + (" (by hand)" if b.manual else "")
                retries = "held: budget spent" if b.retries_held else "go"
                print(f"{safe(b.name)}\t{state}\t{b.state_since:%Y-%m-%d %H:%M:%S}\t"
                      f"{b.failures} of {b.calls}\t{retries}\t{settings_sentence(b)}")  # fmt: skip
    return 0


def settings_sentence(b: Any) -> str:
    """`opens at 50 % of at least 5 calls in 60 s; 3 trial runs after 30 s; no retry budget`"""
    budget = "no retry budget"
    if b.retry_budget is not None:
        budget = f"retries up to {b.retry_budget:.0%} of first calls in {b.retry_window_seconds} s"
    opens = f"opens at {b.failure_threshold:.0%} of at least {b.min_calls} calls"
    return (f"{opens} in {b.window_seconds} s; {b.probes} trial runs after "
            f"{b.cool_off_seconds} s; {budget}")  # fmt: skip


def _share(text: str) -> float:
    """A share as 0.5 or 50%."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a share like 0.5 or 50%, got {text!r}") from None


def add_breaker_commands(sub: Any) -> None:
    p = sub.add_parser(
        "breaker",
        help="list, set, open or close the circuit breakers of the services jobs call",
        description="A job definition names the services its runs call (--dependency). When "
        "too many of a service's calls fail, its breaker opens: the runs calling it wait, "
        "attempt unspent, then a few trial runs go; their success closes it.",
    )
    p.set_defaults(func=cmd_breaker, process="breaker")
    commands = p.add_subparsers(dest="breaker_command", required=True)
    commands.add_parser("list", help="every service's breaker: state, recent failures, settings")
    set_ = commands.add_parser(
        "set", help="a service's breaker settings (replacing them; left out: the default)"
    )
    set_.add_argument("name", help="the service, e.g. payments-api")
    set_.add_argument("--threshold", type=_share,
                      help="open at this share of failed calls (default 0.5)")  # fmt: skip
    set_.add_argument("--min-calls", type=int, help="judge only after this many calls (5)")
    set_.add_argument("--window", type=int, help="over the calls of this many seconds (60)")
    set_.add_argument("--cool-off", type=int, help="stay open this many seconds (30)")
    set_.add_argument("--probes", type=int, help="then let this many trial runs go (3)")
    set_.add_argument(
        "--retry-budget", type=_share, help="retries may reach this share of first calls"
    )
    set_.add_argument("--retry-window", type=int, help="the retry budget's seconds (300)")
    for verb, words in (("open", "make a service's runs wait until closed by hand"),
                        ("close", "let a service's runs go again")):  # fmt: skip
        command = commands.add_parser(verb, help=words)
        command.add_argument("name", help="the service, e.g. payments-api")
        command.add_argument("--note", help="why, kept with the breaker and in the audit log")
