"""A job definition's fields as SQLModel declares them, once: the `job_definitions` table
(`app.models.JobDefinition`) inherits them, `JobSpec` (what creating or changing one takes)
and `JobListRow` (what listing them gives) are them, and so are the API's job shapes.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from app.core import limits
from app.core.fields import Crashes, Name, column, moment
from app.runs.run_fields import RunSettingsFields


class JobFields(RunSettingsFields):
    """A named, reusable job: which handler runs, with what defaults."""

    name: Name = column(sa.Text, unique=True)
    handler: Name = column(sa.Text)
    # A run of this job whose worker died under it this many times is quarantined.
    max_crashes: Crashes = column(
        sa.Integer,
        default=limits.DEFAULT_MAX_CRASHES,
        server_default=str(limits.DEFAULT_MAX_CRASHES),
        description="Times one of its runs may crash the process running it before that run "
        f"is quarantined. Default {limits.DEFAULT_MAX_CRASHES}.",
    )
    # The services it calls, each with a circuit breaker (app.runs.breakers): while one's
    # breaker is open, this job's runs wait.
    dependencies: list[Name] = column(
        ARRAY(sa.Text),
        default_factory=list,
        max_length=limits.MAX_DEPENDENCIES,
        server_default=sa.text("'{}'::text[]"),
        description="The services its runs call, e.g. payments-api: while one's circuit "
        f"breaker is open, its runs wait. At most {limits.MAX_DEPENDENCIES}.",
    )


class JobSpec(JobFields):
    """A job definition to create, or what one becomes when changed. Built without
    validation (`JobSpec.model_construct`) from the pages and the CLI: the catalogue checks
    it, refusing in a person's words and naming the field."""

    def values(self) -> dict[str, Any]:
        """Its fields as given, an execution model as its name (what the statements and the
        audit log take)."""
        return {
            name: value.value if isinstance(value, Enum) else value
            for name in type(self).model_fields
            for value in [getattr(self, name)]
        }


class JobListRow(JobFields):
    """A job definition in the list the API and the CLI read, with what uses it."""

    updated_at: datetime = moment(nullable=False, now=True)
    schedules: int  # how many schedules run it
    workflow_steps: int  # how many workflow steps run it
