"""`sundial submit`, `sundial cancel`, `sundial retry`, `sundial show`, `sundial runs list`:
runs from the shell.

The domain modules each command needs are imported inside it, not at the top: every
`sundial` command builds the whole parser, and `--help` or a service should not pay
for modules it never uses (start-up cost).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from app.cli.inputs import add_job_settings_options, parse_args_json, read_json, whole_number
from app.core import limits
from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.core.errors import UsageError
from app.core.sql import query
from app.dags import dag_submission
from app.dags.dag_spec import parse_dag
from app.runs import run_inserts, submission, transitions
from app.runs.run_list import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE


def parse_time(text: str, option: str = "--at") -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{option} must be an ISO 8601 time like 2030-01-31T09:00:00+01:00, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        raise UsageError(f"{option} needs a time zone (e.g. {text}Z or {text}+01:00)")
    return limits.check_instant(option, moment)


def _deadline(args: argparse.Namespace) -> datetime | None:
    if args.deadline:
        return parse_time(args.deadline, "--deadline")
    if args.expire_after is None:
        return None
    seconds = limits.check_seconds("--expire-after", args.expire_after, 1)
    start = (
        parse_time(args.at) if args.at else datetime.now(UTC) + timedelta(seconds=args.delay or 0)
    )
    return start + timedelta(seconds=seconds)


def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:

    new_run = run_inserts.NewRun(
        handler=args.handler,
        args=parse_args_json(args.args),
        priority=args.priority,
        delay=args.delay,
        run_at=parse_time(args.at) if args.at else None,
        deadline=_deadline(args),
        idempotency_key=args.idempotency_key,
        timeout_seconds=args.timeout,
        max_retries=args.max_retries,
        execution_model=args.execution_model,
        queue=args.queue,
    )
    from app.handlers.gate import refuse_disabled_handlers

    new_run.validate()  # a run refused anyway is refused before any warning about it
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        refuse_disabled_handlers(conn, {new_run.handler})
        unknown = no_live_worker_runs(conn, args.handler)
        if unknown and args.strict:
            raise UsageError(f"{unknown}: nothing submitted (--strict)")
        if args.after:
            print(dag_submission.submit_after(conn, new_run, args.after))
        else:
            print(submission.submit(conn, new_run).id)
    if unknown:  # only about a run that was stored: a refused one gets its sentence alone
        print(
            f"sundial submit: warning: {unknown}: the run waits until a worker that knows it "
            "starts",
            file=sys.stderr,
        )
    return 0


def no_live_worker_runs(conn: Any, handler: str) -> str | None:
    """Why no live worker would run `handler` now; None if one would. Such a run is still
    valid: it waits until a worker that knows the handler starts."""
    from app.core.text import safe
    from app.handlers import worker_registry

    live = [row for row in worker_registry.registrations(conn) if row["live"]]
    if not live:
        return f"no worker is running, so none knows handler {safe(handler)!r}"
    known = set().union(*(row["handlers"] for row in live))
    if handler in known:
        return None
    return (
        f"no live worker knows handler {safe(handler)!r} (they know "
        f"{safe(', '.join(sorted(known)))})"
    )


def cmd_dag(args: argparse.Namespace, settings: Settings) -> int:

    with connect(resolve_database_url(settings), autocommit=True) as conn:
        if args.dag_command == "submit":
            nodes, edges = parse_dag(read_json(args.target))
            dag = dag_submission.submit_dag(conn, nodes, edges)
            print(json.dumps({"dag_run_id": str(dag.id), "runs": dag.run_ids}, indent=2))
            return 0
        dag_run_id = _dag_run_id(args.target)
        rows = conn.execute(
            query("run_reads", "run_list_by_dag"), {"dag_run_id": dag_run_id}
        ).fetchall()
        if not rows:
            raise UsageError(f"there is no DAG run {dag_run_id}")
        if args.dag_command == "cancel":
            counts = transitions.cancel_dag(conn, dag_run_id)
            print(
                f"DAG run {dag_run_id}: {counts['cancelled']} runs cancelled, "
                f"{counts['requested']} running runs asked to stop"
            )
            return 0
    print(json.dumps(rows, default=str, indent=2))
    return 0


def _dag_run_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise UsageError(f"{text!r} is not a DAG run id (a UUID)") from None


def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    limits.check_run_id("RUN", args.run_id)
    from app.people.audit import cli_actor
    from app.runs import run_actions

    with connect(resolve_database_url(settings), autocommit=True) as conn:
        try:
            status = run_actions.cancel(conn, args.run_id, actor=cli_actor())
        except run_actions.RunActionRefused:
            return _not_active(conn, args.run_id, "cancel")
    print(
        f"run {args.run_id} cancelled"
        if status == "cancelled"
        else f"run {args.run_id} is running: cancel requested, its worker will stop it"
    )
    return 0


def cmd_retry(args: argparse.Namespace, settings: Settings) -> int:
    limits.check_run_id("RUN", args.run_id)
    from app.people.audit import cli_actor
    from app.runs import run_actions

    with connect(resolve_database_url(settings), autocommit=True) as conn:
        try:
            retried = run_actions.retry(conn, args.run_id, actor=cli_actor())
        except run_actions.RunActionRefused:
            return _not_active(conn, args.run_id, "retry", finished_only=True)
    waiting = len(retried.unskipped)
    print(
        f"run {args.run_id} queued again"
        + (f"; {waiting} skipped downstream step(s) wait for it again" if waiting else "")
    )
    return 0


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    limits.check_run_id("RUN", args.run_id)
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        row = conn.execute(query("run_reads", "run_by_id"), {"id": args.run_id}).fetchone()
        if row is None:
            raise UsageError(f"there is no run {args.run_id}")
        history = conn.execute(
            query("run_reads", "run_attempt_list"), {"run_id": args.run_id}
        ).fetchall()
    print(json.dumps({**row, "attempts": history}, default=str, indent=2))
    return 0


def filter_of(args: argparse.Namespace) -> Any:
    """The `runs` command's filter options as the runs list's filter, checked."""
    from app.runs import run_list

    return run_list.RunFilter(
        status=args.status,
        job=args.job,
        schedule=args.schedule,
        dag_run_id=run_list.parse_dag_run_id(args.dag_run) if args.dag_run else None,
        since=parse_time(args.since, "--since") if args.since else None,
        until=parse_time(args.until, "--until") if args.until else None,
        error=args.error,
        queue=args.queue,
        search=args.search,
        before_id=args.before_id,
        limit=args.limit,
    ).check()


FILTER_OPTIONS = (
    "status", "job", "schedule", "dag_run", "since", "until", "error", "queue", "search"
)  # fmt: skip


def cmd_runs(args: argparse.Namespace, settings: Settings) -> int:
    """`sundial runs list`: the runs page's list (same filters, same query), as lines;
    `sundial runs cancel|retry|rerun`: act on every run the filter matches."""
    from app.core.text import safe
    from app.runs import run_list

    if args.runs_command != "list":
        return _bulk(args, settings)
    where = filter_of(args)
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        page = run_list.list_runs(conn, where)
    if args.json:
        print(json.dumps(page.runs, default=str, indent=2))
    else:
        for run in page.runs:
            error = f"  {safe(run['last_error'][:120])}" if run["last_error"] else ""
            print(
                f"{run['id']:>10}  {run['status']:<10} attempt {run['attempt']:<3} "
                f"{safe(run['job_name'] or run['handler'])}{error}"
            )
        if not page.runs:
            print("no runs match")
    if page.older is not None:
        print(f"older runs: --before-id {page.older.before_id}", file=sys.stderr)
    return 0


def _bulk(args: argparse.Namespace, settings: Settings) -> int:
    """Count, confirm (or --yes), then every batch here, printing progress."""
    from app.people.audit import cli_actor
    from app.runs import bulk_actions

    verb = bulk_actions.BulkVerb(args.runs_command)
    if args.run and (args.all or any(getattr(args, name) for name in FILTER_OPTIONS)):
        raise UsageError("give either a filter (or --all) or --run IDs, not both")
    if args.run:
        selection = bulk_actions.Selection(run_ids=tuple(args.run))
    else:
        if not any(getattr(args, name) for name in FILTER_OPTIONS) and not args.all:
            raise UsageError(
                f"say which runs to {verb.value.replace('rerun', 're-run')}: a filter such as "
                "--status failed --job nightly-report, --run ID, or --all for every run"
            )
        selection = bulk_actions.Selection(where=filter_of(args))
    selection.check()
    owner = bulk_actions.owner_name("cli")
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        total, _ = bulk_actions.count(conn, selection)
        question = bulk_actions.question(verb, total, selection)
        if not total:
            print(f"{question} None match: nothing to do.")
            return 0
        if not args.yes:
            if not sys.stdin.isatty():
                raise UsageError(f"{question} Add --yes to confirm.")
            if input(f"{question} [y/N] ").strip().lower() not in {"y", "yes"}:
                print("Nothing done.")
                return 1
        action_id = bulk_actions.start(conn, verb, selection, actor=cli_actor(), owner=owner)
        while bulk_actions.run_batch(conn, action_id, owner=owner):
            row = bulk_actions.get(conn, action_id)
            print(f"{row['handled']:,} of {row['total']:,} done", file=sys.stderr)
        row = bulk_actions.get(conn, action_id)
    print(f"{row['title']}: {row['state']}.")
    return 0


def _not_active(conn: Any, run_id: int, verb: str, finished_only: bool = False) -> int:
    from app.runs import moved_runs

    row = conn.execute(query("run_reads", "run_by_id"), {"id": run_id}).fetchone()
    if row is None:
        raise UsageError(f"there is no run {run_id}")
    rerun = f"re-run it (`sundial runs rerun --run {run_id}`)"
    moved = moved_runs.in_history(conn, run_id, instead=rerun)
    if moved is not None:
        raise UsageError(f"cannot {verb} it: {moved}")
    if finished_only:
        raise UsageError(
            f"cannot {verb} run {run_id}: it is {row['status']}; only failed, timed out "
            "or cancelled runs can be retried"
        )
    raise UsageError(f"cannot {verb} run {run_id}: it already ended {row['status']}")


def add_run_commands(sub: Any) -> None:
    submit = sub.add_parser(
        "submit", help="submit a run and print its id", description="Submit a run."
    )
    submit.set_defaults(func=cmd_submit, process="submit")
    submit.add_argument("handler", help="registered handler name, e.g. noop, sleep, http")
    submit.add_argument("--args", default="{}", help="handler arguments as a JSON object")
    when = submit.add_mutually_exclusive_group()
    when.add_argument("--delay", type=float, help="seconds from now before it may start")
    when.add_argument("--at", help="ISO 8601 time with zone at which it may start")
    expiry = submit.add_mutually_exclusive_group()
    expiry.add_argument(
        "--deadline", help="ISO 8601 time with zone: not started by then, it is skipped"
    )
    expiry.add_argument(
        "--expire-after",
        type=float,
        metavar="SECONDS",
        help="not started within this many seconds, it is skipped",
    )
    submit.add_argument("--idempotency-key", help="resubmitting with this key is safe")
    submit.add_argument(
        "--strict",
        action="store_true",
        help="refuse (exit 2) a handler no live worker knows, instead of a warning",
    )
    add_job_settings_options(submit)
    submit.add_argument(
        "--after",
        type=int,
        action="append",
        metavar="RUN_ID",
        help="start only after this run completed (repeatable); skipped if it fails",
    )
    dag = sub.add_parser(
        "dag",
        help="submit, show or cancel a DAG run",
        description="DAG runs: submit a JSON document of nodes and edges (FILE, or - for "
        "standard input), show the runs of a DAG run, or cancel what has not finished.",
    )
    dag.set_defaults(func=cmd_dag, process="dag")
    dag.add_argument("dag_command", choices=["submit", "show", "cancel"])
    dag.add_argument("target", help="FILE or - (submit), or a DAG run id (show, cancel)")
    runs = sub.add_parser(
        "runs",
        help="list runs, newest first, with filters",
        description="List runs newest first (the dashboard's runs page). Page with "
        "--before-id: the command prints the value for the next, older page. cancel, retry "
        "and rerun act on every run the same filter matches, after saying how many.",
    )
    runs.set_defaults(func=cmd_runs, process="runs")
    runs.add_argument(
        "runs_command",
        choices=["list", "cancel", "retry", "rerun"],
        help="list them, or cancel / retry / re-run (same arguments) every run the filter "
        "matches (or each --run), in batches, after saying how many",
    )
    runs.add_argument("--status", help="pending, blocked, running, completed, failed, ...")
    runs.add_argument("--job", help="a handler name or a job definition's name")
    runs.add_argument("--schedule", help="a schedule's name or id")
    runs.add_argument("--dag-run", help="a DAG run id")
    runs.add_argument("--since", help="created at or after this ISO 8601 time with zone")
    runs.add_argument("--until", help="created before this ISO 8601 time with zone")
    runs.add_argument("--error", help="text in the last error (any case)")
    runs.add_argument("--queue", help="runs of this named queue")
    runs.add_argument(
        "--search",
        help="runs by what they carried: 'customer_id = 42', 'order.region = eu', joined "
        "by 'and'; 'result.total = 3' searches the result",
    )
    runs.add_argument("--before-id", type=int, help="runs older than this run id")
    runs.add_argument(
        "--limit",
        type=whole_number(1, MAX_PAGE_SIZE),
        default=DEFAULT_PAGE_SIZE,
        help=f"how many (1-{MAX_PAGE_SIZE}, default {DEFAULT_PAGE_SIZE})",
    )
    runs.add_argument("--json", action="store_true", help="print JSON rows")
    runs.add_argument(
        "--run", type=int, action="append", metavar="ID", help="cancel|retry|rerun: this run"
    )
    runs.add_argument("--all", action="store_true", help="cancel|retry|rerun: with no filter")
    runs.add_argument("--yes", action="store_true", help="cancel|retry|rerun: do not ask")
    for name, func, text in (
        ("cancel", cmd_cancel, "cancel a run (a running one is stopped by its worker)"),
        ("retry", cmd_retry, "queue a failed, timed out or cancelled run again"),
        ("show", cmd_show, "print a run and its attempts as JSON"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.set_defaults(func=func, process=name)
        p.add_argument("run_id", type=int)
