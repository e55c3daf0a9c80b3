"""`sundial schedule …`: add, list, pause, resume, run now, delete schedules; read the ledger.

Each command is one transaction: bad input exits with code 2 and one sentence, and leaves
nothing half-written.

The domain modules each command needs are imported inside it, not at the top: every
`sundial` command builds the whole parser, and `--help` or a service should not pay
for modules it never uses (start-up cost).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.cli.inputs import add_job_settings_options, parse_args_json, whole_number
from app.core import limits
from app.core.config import Settings
from app.core.db import resolve_database_url, transaction
from app.core.errors import UsageError
from app.core.text import safe
from app.people.audit import cli_actor
from app.scheduling import schedule_reads, schedule_rules, schedule_spec
from app.scheduling.cron import DstRepeated, DstSkipped
from app.scheduling.fire_decisions import DEFAULT_SPREAD_SECONDS, OverlapPolicy
from app.scheduling.zones import zone_named

TIME_HELP = (
    "2030-01-31T09:00 (in the schedule's time zone), an ISO time with an offset, "
    "or a duration from now like 90m, 2h, 3d"
)


def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    from app.scheduling import schedules

    with transaction(resolve_database_url(settings)) as conn:
        now = schedule_rules.db_now(conn)
        catchup, limit = schedule_spec.parse_catchup(args.catchup)
        spec = schedule_spec.ScheduleSpec.model_construct(
            name=args.name,
            cron=args.cron,
            every_seconds=args.every,
            timezone=args.timezone,
            start_at=schedule_spec.parse_when(args.start, args.timezone, now)
            if args.start
            else None,
            end_at=schedule_spec.parse_when(args.end, args.timezone, now) if args.end else None,
            overlap=OverlapPolicy(args.overlap),
            catchup=catchup,
            catchup_limit=limit,
            catchup_window_seconds=args.catchup_window,
            exact_minute=args.exact_minute,
            spread_seconds=args.spread,
            dst_skipped=DstSkipped(args.dst_skipped),
            dst_repeated=DstRepeated(args.dst_repeated),
            auto_pause_after=args.auto_pause_after,
            expire_after_seconds=args.expire_after,
            job=args.job,
            workflow=args.workflow,
            handler=args.handler,
            args=parse_args_json(args.args),
            execution_model=args.execution_model,
            queue=args.queue,
            priority=args.priority,
            timeout_seconds=args.timeout,
            max_retries=args.max_retries,
        )
        created = schedules.create_schedule(conn, spec, actor=cli_actor())
    for warning in created.warnings:
        print(f"sundial schedule add: warning: {safe(warning)}", file=sys.stderr)
    print(
        f"schedule {args.name!r} created; first fire "
        f"{format_local(created.next_fire_time, args.timezone)}"
    )
    return 0


def cmd_update(args: argparse.Namespace, settings: Settings) -> int:
    from app.scheduling import schedules

    with transaction(resolve_database_url(settings)) as conn:
        now = schedule_rules.db_now(conn)
        zone = args.timezone or schedule_reads.zone_of(conn, args.name)
        changes = _changes(args, zone, now)
        if not changes:
            raise UsageError("nothing to change: give at least one option (see --help)")
        updated = schedules.update_schedule(conn, args.name, changes, actor=cli_actor())
    for warning in updated.warnings:
        print(f"sundial schedule update: warning: {safe(warning)}", file=sys.stderr)
    if not updated.changed:
        print(f"schedule {args.name!r} already was as asked; nothing changed")
        return 0
    next_fire = (
        format_local(updated.next_fire_time, zone) if updated.next_fire_time else "none (ended)"
    )
    print(f"schedule {args.name!r} updated ({', '.join(updated.changed)}); next fire {next_fire}")
    return 0


def _changes(args: argparse.Namespace, zone: str, now: datetime) -> dict[str, Any]:
    """The `update` options given, as `update_schedule` changes; `none`/`off` clear one."""

    def when(text: str) -> datetime | None:
        return None if _clears(text) else schedule_spec.parse_when(text, zone, now)

    changes: dict[str, Any] = {}
    if args.cron is not None:
        changes["cron"] = args.cron
    if args.every is not None:
        changes["every_seconds"] = args.every
    if args.timezone is not None:
        changes["timezone"] = args.timezone
    if args.start is not None:
        changes["start_at"] = when(args.start)
    if args.end is not None:
        changes["end_at"] = when(args.end)
    if args.catchup is not None:
        changes["catchup"], changes["catchup_limit"] = schedule_spec.parse_catchup(args.catchup)
    if args.catchup_window is not None:
        changes["catchup_window_seconds"] = _count(args.catchup_window, "--catchup-window")
    if args.overlap is not None:
        changes["overlap"] = OverlapPolicy(args.overlap)
    if args.exact_minute:
        changes["exact_minute"] = True
    if args.spread is not None:
        changes.update(exact_minute=False, spread_seconds=args.spread)
    if args.dst_skipped is not None:
        changes["dst_skipped"] = DstSkipped(args.dst_skipped)
    if args.dst_repeated is not None:
        changes["dst_repeated"] = DstRepeated(args.dst_repeated)
    if args.auto_pause_after is not None:
        changes["auto_pause_after"] = _count(args.auto_pause_after, "--auto-pause-after")
    if args.expire_after is not None:
        changes["expire_after_seconds"] = _count(args.expire_after, "--expire-after")
    return changes


def _clears(text: str) -> bool:
    return text.strip().lower() in {"none", "off"}


def _count(text: str, option: str) -> int | None:
    """A whole number, or None for `none`/`off`."""
    if _clears(text):
        return None
    try:
        return int(text)
    except ValueError:  # also a number too long to read
        raise UsageError(
            f"{option} takes a whole number, or none to clear it; got {text!r}"
        ) from None


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:

    with transaction(resolve_database_url(settings)) as conn:
        rows = schedule_reads.list_schedules(conn)
    if not rows:
        print("no schedules")
        return 0
    header = ("NAME", "WHEN", "ZONE", "NEXT FIRE", "STATE", "OVERLAP", "CATCH-UP", "RUNS")
    print_table(header, [_schedule_line(r) for r in rows])
    return 0


def _schedule_line(row: dict[str, Any]) -> tuple[str, ...]:
    when = row["cron"] or f"every {row['interval_seconds']}s"
    next_fire = (
        format_local(row["next_fire_time"], row["timezone"]) if row["next_fire_time"] else "ended"
    )
    state = "active"
    if not row["active"]:
        state = "paused"
        if row["paused_until"]:
            state += f" until {format_local(row['paused_until'], row['timezone'])}"
        if row["paused_note"]:
            state += f": {row['paused_note']}"
    catchup = "latest"
    if row["catchup"]:
        catchup = str(row["catchup_limit"] or "all")
    if row["catchup_window_seconds"]:
        catchup += f" within {row['catchup_window_seconds']}s"
    if row["workflow_name"] is not None:
        target = f"workflow {row['workflow_name']}"
    elif row["job_name"] == row["name"]:
        target = f"{row['job_name']}: {row['handler']}"
    else:
        target = f"job {row['job_name']}: {row['handler']}"
    return (
        row["name"],
        when,
        row["timezone"],
        next_fire,
        state,
        row["overlap"],
        catchup,
        target,
    )


def cmd_pause(args: argparse.Namespace, settings: Settings) -> int:
    from app.scheduling import schedules

    with transaction(resolve_database_url(settings)) as conn:
        until = None
        if args.until:
            until = schedule_spec.parse_when(
                args.until, schedule_reads.zone_of(conn, args.name), schedule_rules.db_now(conn)
            )
        schedules.pause(conn, args.name, note=args.note, until=until, actor=cli_actor())
        zone = schedule_reads.zone_of(conn, args.name)
    print(
        f"schedule {args.name!r} paused" + (f" until {format_local(until, zone)}" if until else "")
    )
    return 0


def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    from app.scheduling import schedules

    with transaction(resolve_database_url(settings)) as conn:
        resumed = schedules.resume(conn, args.name, actor=cli_actor())
    print(f"schedule {args.name!r} " + ("resumed" if resumed else "was not paused"))
    return 0


def cmd_run_now(args: argparse.Namespace, settings: Settings) -> int:
    from app.scheduling import schedules

    with transaction(resolve_database_url(settings)) as conn:
        started = schedules.run_now(conn, args.name, actor=cli_actor())
    print(started.run_id if started.run_id is not None else f"dag run {started.dag_run_id}")
    return 0


def cmd_delete(args: argparse.Namespace, settings: Settings) -> int:
    from app.scheduling import schedules

    with transaction(resolve_database_url(settings)) as conn:
        schedules.delete(conn, args.name, actor=cli_actor())
    print(f"schedule {args.name!r} deleted")
    return 0


def cmd_fires(args: argparse.Namespace, settings: Settings) -> int:

    limits.check_whole("--limit", args.limit, 1, limits.MAX_FIRES_SHOWN)
    with transaction(resolve_database_url(settings)) as conn:
        zone = schedule_reads.zone_of(conn, args.name)
        rows = schedule_reads.list_fires(conn, args.name, args.limit)
    if not rows:
        print(f"schedule {args.name!r} has not fired yet")
        return 0
    header = ("FIRE TIME", "FOR LOCAL TIME", "OUTCOME", "RUN", "DETAIL")
    lines = [
        (
            format_local(r["fire_time"], zone, seconds=True),
            f"{r['local_time']:%Y-%m-%d %H:%M}",
            r["outcome"] + (f" ({r['coalesced_count']} coalesced)" if r["coalesced_count"] else ""),
            str(r["run_id"] or (f"dag run {r['dag_run_id']}" if r["dag_run_id"] else "-")),
            ("manual; " if r["manual"] else "") + (r["detail"] or ""),
        )
        for r in rows
    ]
    print_table(header, lines)
    return 0


def cmd_backfill(args: argparse.Namespace, settings: Settings) -> int:
    """`backfill NAME --from … --to …` starts (or with --dry-run previews) a backfill;
    `backfill cancel ID` cancels one; `backfill NAME` alone lists the schedule's."""
    from app.scheduling import backfills

    if args.name == "cancel" and args.id is not None:
        with transaction(resolve_database_url(settings)) as conn:
            done = backfills.cancel(conn, backfills.parse_id(args.id), actor=cli_actor())
        print(f"backfill {done.backfill_id} cancelled: {done.cancelled} runs cancelled, "
              f"{done.asked_to_stop} running ones asked to stop")  # fmt: skip
        return 0
    if args.id is not None:
        raise UsageError(f"unexpected {args.id!r}: use `backfill NAME --from … --to …` "
                         f"or `backfill cancel ID`")  # fmt: skip
    if args.start is None and args.end is None:
        return _list_backfills(args, settings)
    if args.start is None or args.end is None:
        raise UsageError("give both --from and --to (the range, in the schedule's time zone)")
    with transaction(resolve_database_url(settings)) as conn:
        zone = schedule_reads.zone_of(conn, args.name)
        now = schedule_rules.db_now(conn)
        start = schedule_spec.parse_when(args.start, zone, now)
        end = schedule_spec.parse_when(args.end, zone, now)
        shown = backfills.start(conn, args.name, start=start, end=end,
                                concurrency=args.concurrency, dry_run=args.dry_run,
                                actor=cli_actor())  # fmt: skip
    _print_preview(shown)
    if shown.backfill_id is not None:
        print(f"backfill {shown.backfill_id} started; the trigger starts its runs")
    else:
        print("dry run: nothing was started")
    return 0


def _print_preview(shown: Any) -> None:
    from app.scheduling.backfills import LISTED

    zone = shown.timezone
    if shown.count:
        print(f"{shown.count} runs, the first for {format_local(shown.first.at, zone)}, "
              f"the last for {format_local(shown.last.at, zone)}")  # fmt: skip
    else:
        print("nothing to run: every time in that range already has a run or a decision")
    print(shown.overlap_words)
    for _, note in shown.dst[:LISTED]:
        print(f"clock change: {note}")
    for left in shown.left_alone[:LISTED]:
        print(f"left alone: {format_local(left.at, zone)} ({left.outcome.replace('_', ' ')})")
    if len(shown.left_alone) > LISTED:
        print(f"left alone: and {len(shown.left_alone) - LISTED} more")
    for note in shown.notes:
        print(note)


def _list_backfills(args: argparse.Namespace, settings: Settings) -> int:
    from app.scheduling import backfills

    with transaction(resolve_database_url(settings)) as conn:
        row = schedule_reads.find(conn, args.name)
        rows = backfills.listed(conn, schedule_id=row["id"])
    if not rows:
        print(f"schedule {args.name!r} has no backfills")
        return 0
    zone = row["timezone"]
    header = ("ID", "RANGE", "STATUS", "DONE", "RUNNING", "WAITING", "FAILED", "AT ONCE")
    lines = [
        (
            str(r["id"]),
            f"{format_local(r['range_start'], zone)} to {format_local(r['range_end'], zone)}",
            r["status"],
            str(r["done"]),
            str(r["running"]),
            str(r["waiting"]),
            str(r["failed"]),
            str(r["concurrency"]),
        )
        for r in rows
    ]
    print_table(header, lines)
    return 0


def format_local(instant: datetime, zone: str, *, seconds: bool = False) -> str:
    """`2026-03-08 03:00 EDT`: an instant as the schedule's people read it."""
    local = instant.astimezone(zone_named(zone))
    return local.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")


def print_table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell; names, notes and errors printed escaped."""
    cells = [[safe(c) for c in line] for line in (header, *lines)]
    widths = [max(len(c) for c in column) for column in zip(*cells, strict=True)]
    for line in cells:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def add_schedule_commands(sub: Any) -> None:
    """Register `sundial schedule` and its subcommands on the top-level parser."""
    schedule = sub.add_parser(
        "schedule",
        help="add, list, pause, resume, run now and delete schedules; show their fires",
        description="Recurring schedules: cron or interval, in a time zone.",
    )
    commands = schedule.add_subparsers(dest="schedule_command", metavar="ACTION", required=True)

    def add(name: str, func: Any, text: str, *, named: bool = True) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = commands.add_parser(name, help=text, description=text)
        p.set_defaults(func=func, process="schedule")
        if named:
            p.add_argument("name", help="schedule name")
        return p

    _add_add_options(
        add("add", cmd_add, "create a schedule of a new job (--handler), a job or a workflow")
    )
    _add_timing_options(
        add(
            "update",
            cmd_update,
            "change when a schedule fires or its policies; options not given stay as they are",
        ),
        updating=True,
    )
    add("list", cmd_list, "list schedules with their next fire in their own time zone", named=False)
    pause = add("pause", cmd_pause, "pause a schedule: its fires are recorded as paused")
    pause.add_argument("--note", help="why, shown in `schedule list` and the dashboard")
    pause.add_argument("--until", help=f"resume by itself at this time: {TIME_HELP}")
    add("resume", cmd_resume, "resume a paused schedule")
    add("run-now", cmd_run_now, "create a run of the schedule's job now and print its id")
    add("delete", cmd_delete, "delete a schedule and its fire ledger (runs keep history)")
    backfill = add(
        "backfill",
        cmd_backfill,
        "run a schedule's past times over a range (--from/--to), oldest first; "
        "`backfill NAME` lists its backfills, `backfill cancel ID` cancels one",
    )
    backfill.add_argument("id", nargs="?", help="with `cancel`: the backfill's id")
    backfill.add_argument("--from", dest="start", help=f"the range's start: {TIME_HELP}")
    backfill.add_argument("--to", dest="end", help="the range's end (included), written alike")
    backfill.add_argument(
        "--concurrency",
        type=whole_number(1, limits.MAX_BACKFILL_CONCURRENCY),
        default=1,
        help=f"how many of its runs may run at once (1-{limits.MAX_BACKFILL_CONCURRENCY}, "
        "default 1; one at a time unless the schedule's overlap policy is allow)",
    )
    backfill.add_argument(
        "--dry-run", action="store_true", help="only say what it would run; start nothing"
    )
    fires = add("fires", cmd_fires, "show the fire ledger: what became of each fire, and why")
    fires.add_argument(
        "--limit",
        type=whole_number(1, limits.MAX_FIRES_SHOWN),
        default=50,
        help=f"newest fires shown (1-{limits.MAX_FIRES_SHOWN:,}, default 50)",
    )


def _add_add_options(p: argparse.ArgumentParser) -> None:
    job = p.add_mutually_exclusive_group(required=True)
    job.add_argument("--handler", help="create a job definition running this handler")
    job.add_argument("--job", help="schedule an existing job definition by name")
    job.add_argument("--workflow", help="schedule a workflow: each fire is one DAG run")
    p.add_argument("--args", default="{}", help="handler arguments as a JSON object")
    _add_timing_options(p, updating=False)
    add_job_settings_options(p)


def _add_timing_options(p: argparse.ArgumentParser, *, updating: bool) -> None:
    """When a schedule fires, and its policies. For `update` nothing is required and
    nothing has a default (an option not given stays as it is), and `none` clears a bound,
    the catch-up window or auto-pause."""

    def default(value: Any) -> Any:
        return None if updating else value

    def said(text: str) -> str:
        """Help text; `update` has no defaults to mention."""
        return re.sub(r" \(default[^)]*\)", "", text) if updating else text

    clear = " (none: clear it)" if updating else ""
    count = str if updating else int
    when = p.add_mutually_exclusive_group(required=not updating)
    when.add_argument("--cron", help="5-field cron expression or alias like @hourly")
    when.add_argument("--every", type=int, metavar="SECONDS", help="fire every SECONDS")
    p.add_argument("--timezone", default=default("UTC"), help=said("IANA time zone (default UTC)"))
    p.add_argument("--start", help=f"no fire before: {TIME_HELP}{clear}")
    p.add_argument("--end", help=f"no fire after: {TIME_HELP}{clear}")
    p.add_argument(
        "--catchup",
        default=default("latest"),
        metavar="latest|all|N",
        help=said("after downtime run the latest missed fire (default), all, or the newest N"),
    )
    p.add_argument(
        "--catchup-window",
        type=count,
        metavar="SECONDS",
        help=f"fires older than this are missed{clear}",
    )
    p.add_argument(
        "--overlap",
        default=default(OverlapPolicy.SKIP.value),
        choices=[o.value for o in OverlapPolicy],
        help=said(
            "while an earlier run is active: skip the fire (default), allow it, queue one, "
            "or cancel the earlier run"
        ),
    )
    spread = p.add_mutually_exclusive_group()
    spread.add_argument("--exact-minute", action="store_true", help="no spread: run_at = fire time")
    spread.add_argument(
        "--spread",
        type=int,
        default=default(DEFAULT_SPREAD_SECONDS),
        metavar="SECONDS",
        help=said(
            "spread run_at by a stable per-schedule offset below this "
            f"(default {DEFAULT_SPREAD_SECONDS})"
        ),
    )
    p.add_argument(
        "--dst-skipped",
        default=default(DstSkipped.SHIFT.value),
        choices=[o.value for o in DstSkipped],
        help=said("a local time spring-forward skips: fire when the clocks jump (default) or skip"),
    )
    p.add_argument(
        "--dst-repeated",
        default=default(DstRepeated.FIRST.value),
        choices=[o.value for o in DstRepeated],
        help=said("a local time fall-back repeats: fire the first time (default) or both"),
    )
    p.add_argument(
        "--auto-pause-after",
        type=count,
        metavar="N",
        help=f"pause after N failed runs{' (off: never)' if updating else ''}",
    )
    p.add_argument(
        "--expire-after",
        type=count,
        metavar="SECONDS",
        help="skip a fire's run not started within SECONDS of its time"
        + (" (off: never)" if updating else ""),
    )
