"""A schedule's fields and a fire's, as SQLModel declares them, once: the `schedules` and
`schedule_fires` tables (`app.models`) inherit them, and the API's schedule and fire shapes
are built from them. The rule's checks that span fields (exactly one of cron and interval,
an end after the start) stay in `app.scheduling.schedule_spec`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

import sqlalchemy as sa
from pydantic import AwareDatetime, PlainSerializer, WithJsonSchema
from pydantic import Field as Bounds

from app.core import limits
from app.core.fields import Count, Duration, Fields, Name, WholeSeconds, column, moment
from app.scheduling.cron import DstRepeated, DstSkipped
from app.scheduling.fire_decisions import DEFAULT_SPREAD_SECONDS, OverlapPolicy
from app.scheduling.zones import iana_zone_names

# Exactly the zones of the IANA tz database (app.scheduling.zones.zone_named), listed in the
# API's document.
Zone = Annotated[
    str,
    Bounds(min_length=1, max_length=limits.MAX_NAME_LENGTH),
    WithJsonSchema({"type": "string", "enum": sorted(iana_zone_names())}),
]

Cron = Annotated[str, Bounds(min_length=1, max_length=limits.MAX_TEXT_LENGTH)]

# A wall-clock time in a schedule's zone has no offset, which RFC 3339's `date-time` requires:
# the API's document says what it is, an ISO 8601 local date and time.
WallClock = Annotated[
    datetime,
    PlainSerializer(lambda moment: moment.isoformat(), return_type=str),
    WithJsonSchema({
        "type": "string",
        "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?$",
        "description": "A wall-clock time in the schedule's zone, without an offset.",
    }),
]  # fmt: skip


class ScheduleRuleFields(Fields):
    """When a schedule fires and its policies (see docs/schedules.md)."""

    cron: Cron | None = column(sa.Text, nullable=True)
    every_seconds: Duration | None = column(
        sa.Integer, nullable=True, column_name="interval_seconds"
    )
    timezone: Zone = column(sa.Text, default="UTC", server_default="UTC")
    start_at: AwareDatetime | None = moment()
    end_at: AwareDatetime | None = moment()
    overlap: OverlapPolicy = column(
        sa.Text, default=OverlapPolicy.SKIP, server_default=OverlapPolicy.SKIP.value
    )
    # Catch-up after downtime: false runs the latest missed fire only (coalesce); true
    # backfills them, at most `catchup_limit`, within `catchup_window_seconds` when set.
    catchup: bool = column(sa.Boolean, default=False, server_default=sa.false())
    catchup_limit: Count | None = column(sa.Integer, nullable=True)
    catchup_window_seconds: Duration | None = column(sa.Integer, nullable=True)
    exact_minute: bool = column(sa.Boolean, default=False, server_default=sa.false())
    spread_seconds: WholeSeconds = column(
        sa.Integer, default=DEFAULT_SPREAD_SECONDS, server_default=str(DEFAULT_SPREAD_SECONDS)
    )
    dst_skipped: DstSkipped = column(
        sa.Text, default=DstSkipped.SHIFT, server_default=DstSkipped.SHIFT.value
    )
    dst_repeated: DstRepeated = column(
        sa.Text, default=DstRepeated.FIRST, server_default=DstRepeated.FIRST.value
    )
    # Pause by itself after this many consecutive failed runs (NULL: never).
    auto_pause_after: Count | None = column(sa.Integer, nullable=True)
    expire_after_seconds: Duration | None = column(
        sa.Integer,
        nullable=True,
        default=None,
        description="A fire's run not started within this many seconds of its time is "
        "skipped, as expired (none: it waits as long as it takes).",
    )


class ScheduleFields(ScheduleRuleFields):
    """A schedule as people see it: its rule, its name, when it fires next, its pause."""

    name: str = column(sa.Text, default="", server_default="")
    # The next fire not yet decided; NULL once the schedule has ended. Only moves forward.
    next_fire_time: datetime | None = moment()
    paused_until: datetime | None = moment()


class CalendarFields(Fields):
    """An exclusion calendar: its name, and the country (ISO 3166, as the `holidays`
    library knows it) and subdivision whose public holidays it holds (None: none)."""

    name: Name = column(sa.Text, unique=True)
    country: str | None = column(sa.Text, nullable=True)
    subdivision: str | None = column(sa.Text, nullable=True)


class FireFields(Fields):
    """One intended fire of a schedule and what became of it (the fire ledger)."""

    fire_time: datetime = column(sa.DateTime(timezone=True), primary_key=True)
    # The wall-clock time in the schedule's zone this fire stands for (02:30 even when DST
    # moved the fire to 03:00).
    local_time: WallClock = column(sa.DateTime(timezone=False))
    outcome: str = column(sa.Text)
    # The run this fire created (or, for a coalesced fire, the run that covered it). No
    # foreign key, like every reference to the hot table: history may outlive the run.
    run_id: int | None = column(sa.BigInteger, nullable=True)
    # For a workflow schedule: the DAG run this fire created (or that covered it).
    dag_run_id: uuid.UUID | None = column(sa.Uuid, nullable=True)
    detail: str | None = column(sa.Text, nullable=True)
