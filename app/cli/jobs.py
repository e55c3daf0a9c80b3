"""`sundial job …`: add, update (the services it calls), list and delete job definitions
(what schedules and workflow steps run), and run one now with chosen arguments."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.catalog import hand_runs, job_definitions
from app.catalog.job_fields import JobSpec
from app.cli.inputs import add_job_settings_options, whole_number
from app.core import limits
from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.core.errors import UsageError
from app.core.text import safe
from app.people import audit


def cmd_job(args: argparse.Namespace, settings: Settings) -> int:
    if args.job_command != "list" and not args.name:
        raise UsageError(f"job {args.job_command} needs a NAME")
    actor = audit.cli_actor()
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        if args.job_command == "list":
            for row in job_definitions.list_all(conn):
                print(
                    f"{safe(row.name)}\t{safe(row.handler)}\t{row.execution_model}\t"
                    f"schedules={row.schedules}\tworkflow steps={row.workflow_steps}"
                    + (f"\tcalls={safe(','.join(row.dependencies))}" if row.dependencies else "")
                )
        elif args.job_command == "delete":
            gone = job_definitions.delete(
                conn, args.name, actor=actor, with_schedules=args.with_schedules
            )
            also = f" with schedule(s) {safe(', '.join(gone))}" if gone else ""
            print(f"job {args.name!r} deleted{also}")
        elif args.job_command == "run":
            chosen = job_definitions.parse_args(args.args) if args.args is not None else None
            print(hand_runs.start_job(conn, args.name, chosen, actor=actor))
        elif args.job_command == "update":
            if args.dependency is None and not args.no_dependencies:
                raise UsageError("job update needs --dependency SERVICE or --no-dependencies")
            if args.dependency and args.no_dependencies:
                raise UsageError("give --dependency or --no-dependencies, not both")
            job_definitions.set_dependencies(conn, args.name, args.dependency or [], actor=actor)
            job = job_definitions.get(conn, args.name)
            calls = ", ".join(job["dependencies"]) or "no service"
            print(f"job {args.name!r} updated: its runs call {safe(calls)}")
        else:
            if not args.handler:
                raise UsageError("job add needs --handler")
            spec = JobSpec.model_construct(
                name=args.name,
                handler=args.handler,
                args=job_definitions.parse_args(args.args),
                priority=args.priority,
                timeout_seconds=args.timeout,
                max_retries=args.max_retries,
                execution_model=args.execution_model,
                queue=args.queue,
                max_crashes=args.max_crashes,
                dependencies=args.dependency or [],
            )
            for warning in job_definitions.create(conn, spec, actor=actor):
                print(f"warning: {safe(warning)}", file=sys.stderr)
            print(f"job {args.name!r} created")
    return 0


def add_job_commands(sub: Any) -> None:
    job = sub.add_parser(
        "job",
        help="add, update, list, delete or run job definitions (what schedules and workflow "
        "steps run)",
        description="Job definitions: a named handler with its args and settings.",
    )
    job.set_defaults(func=cmd_job, process="job")
    job.add_argument("job_command", choices=["add", "update", "list", "delete", "run"])
    job.add_argument("name", nargs="?", default="", help="job definition name")
    job.add_argument("--handler", help="registered handler name (add)")
    job.add_argument(
        "--args",
        help="handler arguments as a JSON object (add; run: this run's, checked against the "
        "schema the handler declares, instead of the job's own)",
    )
    job.add_argument(
        "--with-schedules",
        action="store_true",
        help="delete: also delete the schedules that run this job (they are named)",
    )
    add_job_settings_options(job)
    job.add_argument(
        "--max-crashes",
        type=whole_number(1, limits.MAX_CRASHES),
        default=limits.DEFAULT_MAX_CRASHES,
        help="add: a run that crashes the process running it this many times is quarantined "
        f"(1-{limits.MAX_CRASHES}, default {limits.DEFAULT_MAX_CRASHES})",
    )
    job.add_argument(
        "--dependency",
        action="append",
        metavar="SERVICE",
        help="add, update: a service its runs call, e.g. payments-api (repeat for more): while "
        "its circuit breaker is open, the job's runs wait (see `sundial breaker`); update "
        "replaces the services the job names and keeps its other settings",
    )
    job.add_argument(
        "--no-dependencies",
        action="store_true",
        help="update: the job names no service any more",
    )
