"""One SQLModel layer: every table column agrees with its field, and the API's shapes are
built from the domains' fields classes, not declared beside them.

A column and its field disagree when one may be NULL and the other may not, when their
kinds differ (a whole number in a text column), when a default differs from the column's,
or when the range a field allows is not the range the table's CHECK holds.
"""

from __future__ import annotations

import re
import types
import typing
import uuid
from datetime import datetime
from enum import Enum
from typing import Any, Union

import pytest
import sqlalchemy as sa
from pydantic import AwareDatetime, BaseModel
from pydantic.fields import FieldInfo
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlmodel import Field, SQLModel

import app.models
from app.catalog.job_fields import JobFields, JobListRow, JobSpec
from app.catalog.workflow_fields import WorkflowFields, WorkflowStepFields
from app.core import fields
from app.core.fields import Fields, column
from app.runs.queues import QueueFields
from app.runs.run_fields import (
    AttemptFields,
    RunDetailRow,
    RunFields,
    RunRow,
    RunSettingsFields,
)
from app.scheduling.calendars import CalendarSpec
from app.scheduling.schedule_fields import (
    CalendarFields,
    FireFields,
    ScheduleFields,
    ScheduleRuleFields,
)
from app.scheduling.schedule_spec import ScheduleSpec
from app.web.api import schemas

TABLES = sorted(
    (
        mapper.class_
        for mapper in SQLModel._sa_registry.mappers  # type: ignore[attr-defined]
        if getattr(mapper.class_, "__tablename__", None)
    ),
    key=lambda model: model.__tablename__,
)
# Python kinds each SQL type may hold
KINDS: list[tuple[type[Any], tuple[type[Any], ...]]] = [
    (sa.Boolean, (bool,)),
    (sa.Float, (float, int)),
    (sa.Integer, (int,)),  # SmallInteger and BigInteger too
    (sa.Text, (str, Enum)),
    (sa.DateTime, (datetime, AwareDatetime)),
    (sa.Uuid, (uuid.UUID,)),
    (JSONB, (dict, list, object)),
    (sa.JSON, (dict, list, object)),
    (ARRAY, (list,)),
]
_BETWEEN = re.compile(
    r"(\w+) IS NULL OR (\w+) BETWEEN (-?\d+) AND (-?\d+)|(\w+) BETWEEN (-?\d+) AND (-?\d+)"
)


def _bare(annotation: Any) -> tuple[Any, bool]:
    """(the kind a field holds, whether it may be None)."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        kinds = [k for k in typing.get_args(annotation) if k is not type(None)]
        optional = len(kinds) < len(typing.get_args(annotation))
        annotation = kinds[0] if len(kinds) == 1 else object
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    return (origin or annotation), optional


def _range(info: FieldInfo) -> tuple[int | None, int | None]:
    low = high = None
    for meta in [*info.metadata, *_constraints(info.annotation)]:
        low = getattr(meta, "ge", low)
        high = getattr(meta, "le", high)
    return low, high


def _check_ranges(table: Any) -> dict[str, tuple[int, int]]:
    """Column -> (low, high) of the table's BETWEEN checks."""
    found: dict[str, tuple[int, int]] = {}
    for constraint in table.constraints:
        if isinstance(constraint, sa.CheckConstraint):
            for m in _BETWEEN.finditer(str(constraint.sqltext)):
                name = m[2] or m[5]
                low, high = (m[3], m[4]) if m[2] else (m[6], m[7])
                found[name] = (int(low), int(high))
    return found


def disagreements(model: type[SQLModel]) -> list[str]:
    """Where `model`'s table columns and its fields disagree."""
    table = model.__table__  # type: ignore[attr-defined]
    checks = _check_ranges(table)
    found: list[str] = []
    for name, info in model.model_fields.items():
        column_name = _column_name(info) or name
        if column_name not in table.c:
            found.append(f"{table.name}.{column_name}: a field without a column")
            continue
        col = table.c[column_name]
        kind, optional = _bare(info.annotation)
        if optional != col.nullable and not col.primary_key:
            found.append(f"{table.name}.{column_name}: the field says "
                         f"{'optional' if optional else 'required'}, the column "
                         f"{'NULL' if col.nullable else 'NOT NULL'}")  # fmt: skip
        allowed = next((k for t, k in KINDS if isinstance(col.type, t)), None)
        if allowed is None:
            found.append(f"{table.name}.{column_name}: no kind for {col.type}")
        elif kind is not Any and not (isinstance(kind, type) and issubclass(kind, allowed)):
            found.append(f"{table.name}.{column_name}: a {kind} field in a {col.type} column")
        default = getattr(col.server_default, "arg", None)
        if (
            isinstance(default, str)
            and info.default not in (None, ...)
            and not callable(info.default_factory)
        ):
            if str(getattr(info.default, "value", info.default)) != default:
                found.append(f"{table.name}.{column_name}: default {info.default!r}, "
                             f"the column's {default!r}")  # fmt: skip
        low, high = _range(info)
        if (low, high) != (None, None) and column_name in checks:
            if checks[column_name] != (low, high):
                found.append(f"{table.name}.{column_name}: the field allows {low}..{high}, "
                             f"the table {checks[column_name]}")  # fmt: skip
    return found


def _column_name(info: FieldInfo) -> str | None:
    for meta in info.metadata:
        kwargs = getattr(meta, "sa_column_kwargs", None)
        if isinstance(kwargs, dict) and "name" in kwargs:
            return str(kwargs["name"])
    return None


@pytest.mark.parametrize("model", TABLES, ids=lambda m: m.__tablename__)
def test_every_column_agrees_with_its_field(model: type[SQLModel]) -> None:
    assert disagreements(model) == []


def test_a_field_that_disagrees_with_its_column_is_found() -> None:
    class Mismatched(Fields, table=True):
        __tablename__ = "mismatched_for_test"
        __table_args__ = (
            sa.CheckConstraint("priority BETWEEN -5 AND 5", name="mismatched_priority"),
        )

        id: int = Field(primary_key=True)
        priority: fields.Priority = column(sa.SmallInteger, default=1, server_default="1")
        count: int | None = column(sa.Integer)  # NOT NULL column, optional field
        label: int = column(sa.Text)  # a whole number in a text column
        level: int = column(sa.Integer, default=2, server_default="3")

    try:
        found = disagreements(Mismatched)
    finally:
        SQLModel.metadata.remove(Mismatched.__table__)  # type: ignore[attr-defined]
    assert any("priority: the field allows -32767..32767, the table (-5, 5)" in f for f in found)
    assert any("count: the field says optional, the column NOT NULL" in f for f in found)
    assert any("label: a <class 'int'> field in a TEXT column" in f for f in found)
    assert any("level: default 2, the column's '3'" in f for f in found)


def test_tables_inherit_the_domains_fields() -> None:
    assert issubclass(app.models.JobRun, RunFields)
    assert issubclass(app.models.JobRunAttempt, AttemptFields)
    assert issubclass(app.models.JobDefinition, JobFields)
    assert issubclass(app.models.Schedule, ScheduleFields)
    assert issubclass(app.models.ScheduleFire, FireFields)
    assert issubclass(app.models.Workflow, WorkflowFields)
    assert issubclass(app.models.ExclusionCalendar, CalendarFields)
    assert issubclass(app.models.Queue, QueueFields)
    assert issubclass(app.models.WorkflowStep, WorkflowStepFields)


# Response shapes are fields classes with what the API adds.
BUILT_ON = [
    (schemas.RunOut, RunFields),
    (schemas.AttemptOut, AttemptFields),
    (schemas.JobOut, JobFields),
    (schemas.JobIn, JobFields),
    (schemas.ScheduleOut, ScheduleFields),
    (schemas.FireOut, FireFields),
    (schemas.WorkflowOut, WorkflowFields),
    (schemas.WorkflowSummaryOut, WorkflowFields),
    (schemas.WorkflowStepOut, WorkflowStepFields),
    (schemas.QueueOut, QueueFields),
]
# Request and change shapes declare the fields they take as optional: with the same kind.
DECLARED_LIKE = [
    (schemas.RunSettings, RunSettingsFields),
    (schemas.RunIn, RunFields),
    (schemas.DagNodeIn, RunFields),
    (schemas.DagRunStepOut, RunFields),
    (schemas.JobChanges, JobFields),
    (schemas.ScheduleRules, ScheduleRuleFields),
    (schemas.ScheduleIn, ScheduleRuleFields),
    (schemas.WorkflowShapeIn, WorkflowFields),
    (schemas.WorkflowIn, WorkflowFields),
    (schemas.WorkflowStepIn, WorkflowStepFields),
]


@pytest.mark.parametrize("shape, fields_class", BUILT_ON, ids=lambda c: c.__name__)
def test_response_shapes_are_the_fields_classes(
    shape: type[BaseModel], fields_class: type[BaseModel]
) -> None:
    assert issubclass(shape, fields_class)


def _constraints(annotation: Any) -> list[Any]:
    """The bounds inside an annotation (`Priority | None` holds Priority's)."""
    found: list[Any] = []
    for part in typing.get_args(annotation) if typing.get_origin(annotation) else ():
        found += _constraints(part)
    if typing.get_origin(annotation) is typing.Annotated:
        for meta in annotation.__metadata__:
            found += getattr(meta, "metadata", [meta])
    return found


def _kind(info: FieldInfo) -> tuple[Any, list[str]]:
    """A field's kind and constraints, whether it may be None or not."""
    kind, _ = _bare(info.annotation)
    constraints = [*info.metadata, *_constraints(info.annotation)]
    bounds = [m for m in constraints if type(m).__module__.startswith("annotated_types")]
    return kind, sorted(map(repr, bounds))


@pytest.mark.parametrize("shape, fields_class", DECLARED_LIKE, ids=lambda c: c.__name__)
def test_request_shapes_take_the_fields_as_declared(
    shape: type[BaseModel], fields_class: type[BaseModel]
) -> None:
    shared = set(shape.model_fields) & set(fields_class.model_fields)
    assert shared, f"{shape.__name__} takes none of {fields_class.__name__}'s fields"
    for name in shared:
        ours, theirs = shape.model_fields[name], fields_class.model_fields[name]
        assert _kind(ours) == _kind(theirs), f"{shape.__name__}.{name}"


def test_the_domain_takes_and_gives_the_fields_classes() -> None:
    assert issubclass(JobSpec, JobFields) and issubclass(JobListRow, JobFields)
    assert issubclass(RunRow, RunFields) and issubclass(RunDetailRow, RunRow)
    assert issubclass(CalendarSpec, CalendarFields)  # the calendar form's
    # the schedule form's, the CLI's and the API's schedule
    assert issubclass(ScheduleSpec, ScheduleRuleFields)
    assert issubclass(ScheduleSpec, RunSettingsFields)
    spec = JobSpec(name="nightly", handler="noop")
    assert (spec.priority, spec.timeout_seconds, spec.max_retries) == (1, 300, 3)
