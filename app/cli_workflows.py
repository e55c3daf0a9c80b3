"""`sundial job …` (job definitions) and `sundial workflow …` (reusable DAGs)."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from psycopg import errors
from psycopg.types.json import Jsonb

from app import limits, runs, workflows
from app.cli_runs import add_job_settings_options, parse_args_json, read_json
from app.config import Settings
from app.db import connect, resolve_database_url
from app.errors import UsageError
from app.sql import query


def cmd_job(args: argparse.Namespace, settings: Settings) -> int:
    if args.job_command != "list" and not args.name:
        raise UsageError(f"job {args.job_command} needs a NAME")
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        if args.job_command == "list":
            for row in conn.execute(query("workflows", "job_definition_list")).fetchall():
                print(
                    f"{row['name']}\t{row['handler']}\t{row['execution_model']}\t"
                    f"schedules={row['schedules']}\tworkflow steps={row['workflow_steps']}"
                )
            return 0
        if args.job_command == "delete":
            try:
                deleted = conn.execute(
                    query("workflows", "job_definition_delete"), {"name": args.name}
                ).fetchone()
            except errors.ForeignKeyViolation:
                deleted = None
            if deleted is None:
                raise UsageError(
                    f"cannot delete job {args.name!r}: there is no such job, or a workflow "
                    "still uses it"
                )
            print(f"job {args.name!r} deleted")
            return 0
        if not args.handler:
            raise UsageError("job add needs --handler")
        limits.check_name("the job name", args.name)
        new_run = runs.NewRun(
            args.handler,
            parse_args_json(args.args),
            priority=args.priority,
            timeout_seconds=args.timeout,
            max_retries=args.max_retries,
            execution_model=args.execution_model,
        )
        new_run.validate()
        created = conn.execute(
            query("schedules", "job_definition_insert"),
            {
                "id": uuid.uuid4(),
                "name": args.name,
                "handler": new_run.handler,
                "args": Jsonb(new_run.args),
                "execution_model": new_run.execution_model,
                "priority": new_run.priority,
                "timeout_seconds": new_run.timeout_seconds,
                "max_retries": new_run.max_retries,
            },
        ).fetchone()
        if created is None:
            raise UsageError(f"a job definition named {args.name!r} already exists")
    print(f"job {args.name!r} created")
    return 0


def cmd_workflow(args: argparse.Namespace, settings: Settings) -> int:
    if args.workflow_command != "list" and not args.name:
        raise UsageError(f"workflow {args.workflow_command} needs a NAME")
    with connect(resolve_database_url(settings), autocommit=True) as conn:
        command = args.workflow_command
        if command in ("add", "replace"):
            if not args.file:
                raise UsageError(f"workflow {command} needs a FILE (or - for standard input)")
            spec = workflows.parse_spec(args.name, read_json(args.file))
            workflows.define(conn, spec, replace=command == "replace")
            print(f"workflow {args.name!r} {'created' if command == 'add' else 'replaced'}")
        elif command == "list":
            for row in workflows.list_all(conn):
                print(
                    f"{row['name']}\tsteps={row['steps']}\tschedules={row['schedules']}\t"
                    f"{row['description']}"
                )
        elif command == "show":
            print(json.dumps(workflows.show(conn, args.name), indent=2))
        elif command == "delete":
            workflows.delete(conn, args.name)
            print(f"workflow {args.name!r} deleted")
        else:  # run
            dag = workflows.run_now(conn, args.name)
            print(json.dumps({"dag_run_id": str(dag.id), "runs": dag.run_ids}, indent=2))
    return 0


def add_workflow_commands(sub: Any) -> None:
    job = sub.add_parser(
        "job",
        help="add, list or delete job definitions (what schedules and workflow steps run)",
        description="Job definitions: a named handler with its args and settings.",
    )
    job.set_defaults(func=cmd_job, process="job")
    job.add_argument("job_command", choices=["add", "list", "delete"])
    job.add_argument("name", nargs="?", default="", help="job definition name")
    job.add_argument("--handler", help="registered handler name (add)")
    job.add_argument("--args", default="{}", help="handler arguments as a JSON object")
    add_job_settings_options(job)

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
