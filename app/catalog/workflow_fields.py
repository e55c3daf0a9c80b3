"""A workflow's fields and its steps', as SQLModel declares them, once: the `workflows` and
`workflow_steps` tables (`app.models`) inherit them, and the API's workflow shapes are built
from them. A workflow as a whole (its steps and the edges between them) is
`app.catalog.workflows.WorkflowSpec`: a graph, checked as one, not a row.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from app.core.fields import Fields, Name, Text, column, json_object


class WorkflowFields(Fields):
    """A named, reusable DAG over job definitions."""

    name: Name = column(sa.Text, unique=True)
    description: Text = column(sa.Text, default="", server_default="")


class WorkflowStepFields(Fields):
    """A step of a workflow: a job definition, with args merged over the job's own."""

    args: dict[str, Any] = json_object("Merged over the job's.")
