"""Runs a person starts by hand: one run of a job definition with the arguments they
chose, and what to offer them next time (the arguments of the last such run).

The page, the API and the CLI call these; the arguments are checked like a job's own
(a JSON object within Sundial's ranges, and the schema the handler declares, if any), and
the start is audited (`job.run`, with the run's id and arguments) in the same transaction.

    run_id = start_job(conn, "nightly", {"email": "ops@example.com"}, actor="alice")
    last_job_args(conn, "nightly")  # -> LastArgs(args={...}, at=..., actor="alice")

A workflow's DAG run is started by `app.catalog.workflows.run_now` with each step's
arguments; `workflow_defaults` and `last_workflow_args` are what its form offers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.catalog import job_definitions
from app.catalog.job_definitions import JobError
from app.core import limits
from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import query
from app.dags.workflow_shapes import shapes
from app.handlers import handler_args
from app.people import audit
from app.runs import run_inserts, submission

JOB_RUN = "job.run"  # audit action of a job run started by hand


@dataclass(frozen=True, slots=True)
class LastArgs:
    """The arguments of the last run started by hand, when and by whom."""

    args: Any
    at: datetime
    actor: str


def check_args(conn: Conn, handler: str, args: Any, now: datetime | None = None) -> dict[str, Any]:
    """`args` as a run of `handler` may take them: a JSON object within Sundial's ranges
    that fits the schema the handler declares (field `args.<name>` on a misfit)."""
    if not isinstance(args, dict):
        raise JobError('the arguments must be a JSON object, like {"key": 1}', "args")
    try:
        checked = limits.check_args("args", args)
    except UsageError as exc:
        raise JobError(str(exc), "args") from None
    try:
        handler_args.check_declared(conn, handler, checked, now)
    except handler_args.ArgsError as exc:
        raise JobError(str(exc), f"args.{exc.name}" if exc.name else "args") from None
    return checked


def start_job(
    conn: Conn,
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    actor: str,
    now: datetime | None = None,
) -> int:
    """(new) -> pending: one run of job `name`, due at once, with `args` (None: the job's
    own) and the job's settings; its id. `JobError` for an unknown job or bad arguments
    (nothing started); `HandlerDisabled` when the fleet turned the handler off."""
    with conn.transaction():
        job = job_definitions.get(conn, name)
        chosen = check_args(conn, job["handler"], dict(job["args"] if args is None else args), now)
        new_run = run_inserts.NewRun(
            handler=job["handler"],
            args=chosen,
            priority=job["priority"],
            timeout_seconds=job["timeout_seconds"],
            max_retries=job["max_retries"],
            execution_model=job["execution_model"],
            job_id=job["id"],
            queue=job["queue"],
        )
        try:
            run_id = submission.submit(conn, new_run, now=now).id
        except run_inserts.SubmitError as exc:
            raise JobError(str(exc), exc.field) from None
        audit.record(conn, actor, JOB_RUN, "job", name, after={"run_id": run_id, "args": chosen},
                     now=now, subject_id=job["id"])  # fmt: skip
    return run_id


def last_job_args(conn: Conn, name: str) -> LastArgs | None:
    """The arguments of job `name`'s last run started by hand (None: never)."""
    job = job_definitions.get(conn, name)
    return _last(conn, "job", job["id"], JOB_RUN)


def _last(conn: Conn, target_type: str, subject_id: Any, action: str) -> LastArgs | None:
    row = audit.last_action(conn, target_type, subject_id, action)
    after = (row["details"] or {}).get("after") if row else None
    if row is None or not isinstance(after, dict) or not isinstance(after.get("args"), dict):
        return None
    return LastArgs(after["args"], row["at"], row["actor"])


def last_workflow_args(conn: Conn, name: str) -> LastArgs | None:
    """The arguments, step by step, of workflow `name`'s last DAG run started by hand
    (None: never, or only before such runs recorded their arguments)."""
    row = conn.execute(query("workflows", "workflow_by_name"), {"name": name}).fetchone()
    return _last(conn, "workflow", row["id"], "workflow.run") if row else None


@dataclass(frozen=True, slots=True)
class StepDefaults:
    """What a step of a workflow runs unless a person says otherwise."""

    job: str
    handler: str
    args: dict[str, Any]  # the job's args under the step's


def workflow_defaults(conn: Conn, name: str) -> dict[str, StepDefaults]:
    """Each step of workflow `name` as a DAG run of it starts it (empty: no such workflow)."""
    row = conn.execute(query("workflows", "workflow_by_name"), {"name": name}).fetchone()
    if row is None:
        return {}
    shape = shapes(conn, [row["id"]])[row["id"]]
    return {
        step: StepDefaults(shape.steps[step].job, run.handler, dict(run.args))
        for step, run in shape.runs.items()
    }
