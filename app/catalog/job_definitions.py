"""Job definitions for people: list, create, update, delete — one set of rules for the CLI
and the dashboard.

A job definition names a handler, its args and run settings; schedules and workflow steps
run it. Bad input raises `JobError` with one sentence and the field it concerns; nothing is
written then. Each change is written to the audit log in the same transaction.

    with transaction(url) as conn:
        create(conn, JobSpec(name="nightly", handler="send_report", args={"to": "ops"}),
               actor="alice")
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from app.catalog.job_fields import JobListRow, JobSpec
from app.core import fields, limits
from app.core.db import Conn
from app.core.errors import UsageError, about
from app.core.fields import Crashes
from app.core.name_pages import NamePage, page_by_name
from app.core.sql import like_literal, query
from app.handlers import handler_args, worker_registry
from app.handlers.builtin import BUILTINS
from app.handlers.gate import HandlerDisabled, refuse_disabled_handlers
from app.people import audit, versions
from app.runs import run_inserts
from app.scheduling.schedule_spec import ScheduleError, check_handler
from app.scheduling.schedules import delete as delete_schedule

# Handlers that run arbitrary commands: only admins may put them in a job.
DANGEROUS_HANDLERS = frozenset({"shell"})


class JobError(UsageError):
    """A job definition cannot be written as asked. `field` names the input at fault."""


def parse_args(text: str) -> dict[str, Any]:
    """Handler args from JSON text: a JSON object, or a JobError on the `args` field."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise JobError(
            f"args are not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", "args"
        ) from None
    except (ValueError, RecursionError):  # a 5,000-digit number, 50,000-deep nesting
        raise JobError(
            "args are beyond what Sundial supports (see Supported ranges)", "args"
        ) from None
    if not isinstance(value, dict):
        raise JobError('args must be a JSON object, like {"key": 1}', "args")
    try:
        return limits.check_args("args", value)
    except UsageError as exc:
        raise JobError(str(exc), "args") from None


def validate(spec: JobSpec, allow_dangerous: bool = True) -> None:
    name = spec.name.strip()
    if spec.handler in DANGEROUS_HANDLERS and not allow_dangerous:
        raise JobError(f"only an admin may create a job that runs {spec.handler!r}", "handler")
    try:
        limits.check_name("a job name", name)
    except UsageError as exc:
        raise JobError(str(exc), "name") from None
    spec.dependencies = check_dependencies(spec.dependencies)
    low, high = fields.bounds(Crashes)
    if not low <= spec.max_crashes <= high:
        raise JobError(
            f"crashes before quarantine must be between {low} and {high}, got {spec.max_crashes}",
            "max_crashes",
        )
    checks = run_inserts.NewRun(
        spec.handler,
        spec.args,
        priority=spec.priority,
        timeout_seconds=spec.timeout_seconds,
        max_retries=spec.max_retries,
        execution_model=spec.execution_model,
        queue=spec.queue,
    )
    try:
        checks.validate()
    except run_inserts.SubmitError as exc:
        raise JobError(str(exc), exc.field) from None


def check_dependencies(names: Any) -> list[str]:
    """The services a job names as called by its runs: names, at most MAX_DEPENDENCIES,
    each once (in the order given)."""
    if not isinstance(names, list | tuple):
        raise JobError("dependencies must be a list of names, like [\"payments-api\"]",
                       "dependencies")  # fmt: skip
    checked: list[str] = []
    with about("dependencies"), limits.refused_as(JobError):
        for name in names:
            name = limits.check_name("a dependency's name", name).strip()
            if name not in checked:
                checked.append(name)
    if len(checked) > limits.MAX_DEPENDENCIES:
        raise JobError(f"a job may name at most {limits.MAX_DEPENDENCIES} dependencies",
                       "dependencies")  # fmt: skip
    return checked


def handler_choices(conn: Conn, now: datetime | None = None) -> list[str]:
    """Handlers a job may name: the built-ins and those live workers registered."""
    rows = worker_registry.registrations(conn, now)
    live = set().union(*(r["handlers"] for r in rows if r["live"]))
    return sorted(set(BUILTINS) | live)


def args_schema(conn: Conn, handler: str, now: datetime | None = None) -> dict[str, Any] | None:
    """The args schema `handler` declares (from the newest live worker that declares one)."""
    return handler_args.declared_schema(conn, handler, now)


def _check_args(conn: Conn, spec: JobSpec, now: datetime | None = None) -> None:
    """Args must fit the schema the handler declares, if it declares one."""
    try:
        handler_args.check_declared(conn, spec.handler, spec.args, now)
    except handler_args.ArgsError as exc:
        raise JobError(str(exc), f"args.{exc.name}" if exc.name else "args") from None


def list_all(conn: Conn) -> list[JobListRow]:
    """Every job definition by name, with how many schedules and workflow steps run it."""
    rows = conn.execute(query("job_definitions", "job_definition_list"))
    return [JobListRow.model_construct(**row) for row in rows]


PICK_FROM_LIST = 200  # up to this many jobs, a form lists them all; beyond, it finds them
FOUND_NAMES = 20  # names a search for a job offers at once


def choices(conn: Conn) -> list[str] | None:
    """Every job's name, in order, for a form that picks one from a list; None when there
    are more than `PICK_FROM_LIST` (the form then finds the job by part of its name)."""
    rows = conn.execute(
        query("job_definitions", "job_definition_names"), {"limit": PICK_FROM_LIST + 1}
    ).fetchall()
    return None if len(rows) > PICK_FROM_LIST else [r["name"] for r in rows]


def names_matching(conn: Conn, text: str) -> list[str]:
    """Up to `FOUND_NAMES` job names holding `text` (any case), those starting with it
    first; none for blank text."""
    text = text.strip()[: limits.MAX_NAME_LENGTH]
    if not text:
        return []
    params = {
        "pattern": f"%{like_literal(text)}%",
        "prefix": f"{like_literal(text)}%",
        "limit": FOUND_NAMES,
    }
    rows = conn.execute(query("job_definitions", "job_definition_names_matching"), params)
    return [r["name"] for r in rows]


LIST_PAGE = 100  # jobs listed on one page


def page(conn: Conn, q: str | None = None, after: str | None = None,
         limit: int | None = None) -> NamePage:  # fmt: skip
    """One page of jobs by name, after the name `after` (None: the first page); `q` keeps
    those whose name or handler contains it."""
    return page_by_name(
        conn,
        query("job_definitions", "job_definition_page"),
        query("job_definitions", "job_definition_count"),
        {"q": like_literal(q) if q else None},
        after,
        limit or LIST_PAGE,
    )


def get(conn: Conn, name: str) -> dict[str, Any]:
    """One job definition with the names of the schedules and workflows that use it."""
    row = conn.execute(
        query("job_definitions", "job_definition_lock_by_name"), {"name": name}
    ).fetchone()
    if row is None:
        raise JobError(f"there is no job named {name!r}")
    uses = conn.execute(query("job_definitions", "job_definition_uses"), {"id": row["id"]})
    return {**row, **(uses.fetchone() or {})}


def _snapshot(row: dict[str, Any] | JobSpec) -> dict[str, Any]:
    values = row.values() if isinstance(row, JobSpec) else row
    return {k: values[k] for k in JobSpec.model_fields if k in values}


def _params(spec: JobSpec, job_id: uuid.UUID) -> dict[str, Any]:
    values = spec.values()
    return {**values, "name": spec.name.strip(), "args": Jsonb(spec.args), "id": job_id}


def create(conn: Conn, spec: JobSpec, *, actor: str, allow_dangerous: bool = True) -> list[str]:
    """A new job definition; returns warnings (a handler no worker could vouch for yet)."""
    validate(spec, allow_dangerous)
    with conn.transaction():
        warnings = _check_handler(conn, spec.handler)
        _check_args(conn, spec)
        job_id = uuid.uuid4()
        created = conn.execute(
            query("job_definitions", "job_definition_insert"), _params(spec, job_id)
        ).fetchone()
        if created is None:
            raise JobError(f"a job named {spec.name.strip()!r} already exists", "name")
        audit.record(conn, actor, "job.create", "job", spec.name.strip(), after=_snapshot(spec),
                     subject_id=job_id)  # fmt: skip
    return warnings


def _check_handler(conn: Conn, handler: str, now: datetime | None = None) -> list[str]:
    """Refuse a handler no worker has or the fleet turned off; warnings for one no worker
    could vouch for yet."""
    try:
        refuse_disabled_handlers(conn, [handler])
        return check_handler(conn, handler, now)
    except (ScheduleError, HandlerDisabled) as exc:
        raise JobError(str(exc), "handler") from None


def update(
    conn: Conn,
    name: str,
    spec: JobSpec,
    *,
    actor: str,
    allow_dangerous: bool = True,
    action: str = "job.update",
    now: datetime | None = None,
) -> list[str]:
    """Change a job definition (its name too); schedules and workflows follow it."""
    validate(spec, allow_dangerous)
    with conn.transaction():
        before = get(conn, name)
        if before["handler"] in DANGEROUS_HANDLERS and not allow_dangerous:
            raise JobError(f"only an admin may change a job that runs {before['handler']!r}")
        warnings = _check_handler(conn, spec.handler, now)
        _check_args(conn, spec, now)
        try:
            with conn.transaction():
                conn.execute(
                    query("job_definitions", "job_definition_update"),
                    {**_params(spec, before["id"]), "now": now},
                )
        except psycopg.errors.UniqueViolation:
            raise JobError(f"a job named {spec.name.strip()!r} already exists", "name") from None
        audit.record(
            conn,
            actor,
            action,
            "job",
            spec.name.strip(),
            before=_snapshot(before),
            after=_snapshot(spec),
            now=now,
            subject_id=before["id"],
        )
    return warnings


def set_dependencies(
    conn: Conn, name: str, dependencies: list[str], *, actor: str, now: datetime | None = None
) -> list[str]:
    """Replace the services a job names as called by its runs, keeping its other settings
    (`sundial job update --dependency`); audited as any change."""
    with conn.transaction():
        before = get(conn, name)
        values = {k: before[k] for k in JobSpec.model_fields if k in before}
        spec = JobSpec.model_construct(**{**values, "dependencies": dependencies})
        return update(conn, name, spec, actor=actor, now=now)


def apply_snapshot(
    conn: Conn, name: str, snapshot: Mapping[str, Any], *, actor: str, action: str
) -> None:
    """Make job `name` as `snapshot` (an audit after-snapshot) says again: its handler,
    args and run settings; its name stays. Validated like any edit."""
    kept = {k: snapshot[k] for k in JobSpec.model_fields if k in snapshot and k != "name"}
    update(conn, name, JobSpec.model_construct(name=name, **kept), actor=actor, action=action)


versions.register(
    versions.Kind(
        "job",
        ("job.create", "job.update"),
        apply_snapshot,
        ("job_definitions", "job_definition_by_name"),
    )
)


def delete(conn: Conn, name: str, *, actor: str, with_schedules: bool = False) -> list[str]:
    """Delete a job definition. Refused while a workflow uses it, and while schedules use
    it unless `with_schedules` (they are deleted with it). Returns the schedules deleted."""
    with conn.transaction():
        row = get(conn, name)
        if row["workflow_names"]:
            raise JobError(
                f"job {name!r} cannot be deleted: a workflow still uses it "
                f"({_names(row['workflow_names'])}); remove it from the workflow first"
            )
        if row["schedule_names"] and not with_schedules:
            raise JobError(
                f"job {name!r} cannot be deleted: {_run_by(row['schedule_names'])}; delete "
                "the schedules too (--with-schedules) or move them first"
            )
        for schedule in row["schedule_names"]:  # each audited as its own deletion
            delete_schedule(conn, schedule, actor=actor)
        conn.execute(query("job_definitions", "job_definition_delete"), {"id": row["id"]})
        audit.record(
            conn,
            actor,
            "job.delete",
            "job",
            name,
            before={**_snapshot(row), "schedules": row["schedule_names"]},
            subject_id=row["id"],
        )
    return list(row["schedule_names"])


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _run_by(schedules: list[str]) -> str:
    if len(schedules) == 1:
        return f"schedule {schedules[0]!r} runs it"
    return f"schedules {_names(schedules)} run it"
