"""`sundial workflow …`: define, list, show, delete and run reusable DAGs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.catalog import workflows
from app.cli.inputs import read_json
from app.core.config import Settings
from app.core.db import connect, resolve_database_url
from app.core.errors import UsageError
from app.core.text import safe
from app.people import audit


def cmd_workflow(args: argparse.Namespace, settings: Settings) -> int:
    if args.workflow_command != "list" and not args.name:
        raise UsageError(f"workflow {args.workflow_command} needs a NAME")
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        command = args.workflow_command
        if command in ("add", "replace"):
            if not args.file:
                raise UsageError(f"workflow {command} needs a FILE (or - for standard input)")
            spec = workflows.parse_spec(args.name, read_json(args.file))
            workflows.define(conn, spec, actor=audit.cli_actor(), replace=command == "replace")
            print(f"workflow {args.name!r} {'created' if command == 'add' else 'replaced'}")
        elif command == "list":
            for row in workflows.list_all(conn):
                print(
                    f"{safe(row['name'])}\tsteps={row['steps']}\tschedules={row['schedules']}\t"
                    f"{safe(row['description'])}"
                )
        elif command == "show":
            print(json.dumps(workflows.show(conn, args.name), indent=2))
        elif command == "delete":
            schedules = workflows.delete(
                conn, args.name, actor=audit.cli_actor(), with_schedules=args.with_schedules
            )
            print(
                f"workflow {args.name!r} deleted"
                + (f" with schedule(s) {', '.join(map(repr, schedules))}" if schedules else "")
            )
        else:  # run
            dag = workflows.run_now(
                conn, args.name, actor=audit.cli_actor(), args=_step_args(args.args)
            )
            print(json.dumps({"dag_run_id": str(dag.id), "runs": dag.run_ids}, indent=2))
    return 0


def _step_args(text: str | None) -> dict[str, dict[str, Any]] | None:
    """`--args` of `workflow run`: a JSON object of steps' arguments, by step name."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise UsageError('--args must be JSON like {"load": {"batch": 10}}') from None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise UsageError('--args must map step names to JSON objects, like {"load": {"batch": 10}}')
    return value


def add_workflow_commands(sub: Any) -> None:
    workflow = sub.add_parser(
        "workflow",
        help="define, list, show, delete or run workflows (reusable DAGs of job definitions)",
        description='Workflows. FILE is JSON: {"steps": {"extract": {"job": "extract"}, '
        '"load": {"job": "load", "args": {...}, "after": ["extract"]}}, "edges": [...]}',
    )
    workflow.set_defaults(func=cmd_workflow, process="workflow")
    workflow.add_argument(
        "workflow_command", choices=["add", "replace", "list", "show", "delete", "run"]
    )
    workflow.add_argument("name", nargs="?", default="", help="workflow name")
    workflow.add_argument("file", nargs="?", help="workflow JSON (add, replace), or - for stdin")
    workflow.add_argument(
        "--args",
        help='run: arguments of some steps instead of their own, e.g. {"load": {"batch": 10}}',
    )
    workflow.add_argument(
        "--with-schedules",
        action="store_true",
        help="delete: also delete the schedules that run it, with their fire ledger "
        "(without it, a workflow that schedules run is not deleted)",
    )
