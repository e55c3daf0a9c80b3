"""The kinds of value a field can hold, with the ranges of `app.core.limits`.

Each is a type with its bounds attached, written once: the SQLModel field classes of each
domain (`app.runs.run_fields`, `app.catalog.job_fields`, `app.scheduling.schedule_fields`)
declare their fields with them, so a table's column, the API's shapes and their OpenAPI
document all carry the same range. The domain functions check the same limits again for the
doors that do not go through a shape (the CLI, the pages, the Python client).

    priority: Priority = Field(default=1, sa_type=sa.SmallInteger, nullable=False)
"""

from __future__ import annotations

from typing import Annotated, Any

import sqlalchemy as sa
from pydantic import BeforeValidator, ConfigDict
from pydantic import Field as Bounds
from pydantic_core import PydanticUndefined
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from app.core import limits


def _whole(value: Any) -> Any:
    """JSON Schema's `integer`: 5.0 is one (a number without a fraction), `true` and "5"
    are not (the API validates bodies strictly)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Whole numbers: the bounds come before the validator, so the document states them.
WHOLE = BeforeValidator(_whole)

# A name as every door reads it (app.core.limits.check_name)
Name = Annotated[
    str, Bounds(min_length=1, max_length=limits.MAX_NAME_LENGTH, pattern=limits.NAME_PATTERN)
]
Text = Annotated[str, Bounds(max_length=limits.MAX_TEXT_LENGTH)]
Key = Annotated[
    str, Bounds(min_length=1, max_length=limits.MAX_KEY_LENGTH, pattern=limits.NAME_PATTERN)
]
Priority = Annotated[int, Bounds(ge=-limits.MAX_PRIORITY, le=limits.MAX_PRIORITY), WHOLE]
# Timeouts, intervals, catch-up windows: at least a second
Duration = Annotated[int, Bounds(ge=1, le=limits.MAX_DURATION_SECONDS), WHOLE]
# Spreads: none at all is a choice
WholeSeconds = Annotated[int, Bounds(ge=0, le=limits.MAX_DURATION_SECONDS), WHOLE]
Seconds = Annotated[float, Bounds(ge=0, le=limits.MAX_DURATION_SECONDS)]
Retries = Annotated[int, Bounds(ge=0, le=limits.MAX_RETRIES), WHOLE]
Crashes = Annotated[int, Bounds(ge=1, le=limits.MAX_CRASHES), WHOLE]
Count = Annotated[int, Bounds(ge=1, le=limits.MAX_COUNT), WHOLE]


class Fields(SQLModel):
    """The base of each domain's fields classes. What a response holds it always holds:
    its document says so (a field with a default is required in what is sent back)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)  # type: ignore[assignment]


class Shape(Fields):
    """A request shape built from a domain's fields: it validates JSON's own types strictly
    (no `true` or "5" where a whole number is expected), and it refuses fields it does not
    know. Strict in its config: a SQLModel class does not take `strict` from the call."""

    model_config = ConfigDict(extra="forbid", strict=True)


NOW = sa.text("now()")


def column(
    sa_type: Any,
    *,
    default: Any = PydanticUndefined,
    server_default: Any = None,
    nullable: bool = False,
    description: str | None = None,
    column_name: str | None = None,
    **field: Any,
) -> Any:
    """A field that is also a column: its SQL type, whether it may be NULL, the default the
    database gives it. A field without a default is required in every shape built from it
    (a row always has it; the database fills it in on insert). `column_name` names a column
    the field calls otherwise."""
    kwargs: dict[str, Any] = {}
    if server_default is not None:
        kwargs["server_default"] = server_default
    if column_name is not None:
        kwargs["name"] = column_name
    if default is PydanticUndefined and nullable:
        default = None
    return Field(
        default=default,
        sa_type=sa_type,
        nullable=nullable,
        sa_column_kwargs=kwargs,
        description=description,
        **field,
    )


def moment(*, nullable: bool = True, now: bool = False, description: str | None = None) -> Any:
    """A TIMESTAMPTZ column; `now` gives it the database clock as default."""
    return column(
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=NOW if now else None,
        description=description,
    )


def json_object(description: str | None = None) -> Any:
    """A JSONB object column, `{}` unless given."""
    return column(
        JSONB,
        default_factory=dict,
        server_default=sa.text("'{}'::jsonb"),
        description=description,
    )


def bounds(kind: Any) -> tuple[int, int]:
    """The range a whole-number kind holds: `bounds(Priority)` is (-32767, 32767)."""
    low = high = None
    for meta in getattr(kind, "__metadata__", ()):
        for bound in getattr(meta, "metadata", ()):
            low = getattr(bound, "ge", low)
            high = getattr(bound, "le", high)
    if low is None or high is None:
        raise TypeError(f"{kind} has no range")
    return low, high


def check_whole(kind: Any, label: str, value: Any) -> int:
    """`value` as a whole number within `kind`'s range, or a LimitError that names it."""
    return limits.check_whole(label, value, *bounds(kind))
