"""`sundial history [list|archive DAY]`: the days of run history kept in their partitions,
with rows and size, and exporting a day now (the reaper archives on its own before it drops
a day, when SUNDIAL_ARCHIVE_DIR is set). See `app.runs.history`."""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.core.errors import UsageError


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    from app.runs import history

    with connect(resolve_database_url(settings), autocommit=True) as conn:
        if args.history_command == "archive":
            folder = args.to or settings.archive_dir
            if folder is None:
                raise UsageError("say where to write the files: --to FOLDER or SUNDIAL_ARCHIVE_DIR")
            kept = {d.day for d in history.days(conn)}
            if args.day not in kept:
                raise UsageError(
                    f"no history is kept for {args.day}: `sundial history` lists the days"
                )
            for path in history.archive_day(conn, args.day, folder):
                print(path)
            return 0
        days = history.days(conn)
        print("day\truns\tattempts\tlog lines\tsize")
        for d in days:
            print(f"{d.day}\t{d.runs}\t{d.rows.get('run_attempt_history', 0)}\t"
                  f"{d.rows.get('run_log_history', 0)}\t{_size(d.bytes)}")  # fmt: skip
        print(f"{len(days)} days, {sum(d.runs for d in days)} runs, "
              f"{_size(sum(d.bytes for d in days))}; {_retention(settings)}")  # fmt: skip
    return 0


def _retention(settings: Settings) -> str:
    if settings.retention_days is None:
        return "kept forever (SUNDIAL_RETENTION_DAYS=0)"
    cutoff = datetime.now(UTC) - timedelta(days=settings.retention_days)
    days = f"SUNDIAL_RETENTION_DAYS={settings.retention_days:g}"
    return f"days before {cutoff.date()} are dropped ({days})"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("kB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            break
    return f"{size:.1f} {unit}"


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a day is written YYYY-MM-DD, got {text!r}") from None


def add_history_commands(sub: Any) -> None:
    p = sub.add_parser(
        "history",
        help="list the days of run history kept, or export one",
        description="Ended runs leave the hot tables for day partitions of their history "
        "(after SUNDIAL_HOT_MINUTES; dead letters after SUNDIAL_DEAD_LETTER_DAYS); the reaper "
        "drops whole days past SUNDIAL_RETENTION_DAYS, exported to SUNDIAL_ARCHIVE_DIR first "
        "when it is set.",
    )
    p.set_defaults(func=cmd_history, process="history", history_command="list")
    commands = p.add_subparsers(dest="history_command")
    commands.add_parser("list", help="every day kept: runs, attempts, log lines, size on disk")
    archive = commands.add_parser(
        "archive", help="export a day's runs now, as gzip CSV files per table (it stays kept)"
    )
    archive.add_argument("day", type=_day, help="the day, YYYY-MM-DD (UTC)")
    archive.add_argument("--to", type=Path, help="the folder (default: SUNDIAL_ARCHIVE_DIR)")
