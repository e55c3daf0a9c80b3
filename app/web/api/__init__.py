"""The JSON API under /api/v1: one module per resource (`runs`, `schedules`, `catalog` for
jobs and workflows, `queues`), `core` for what they share (tokens, validation, JSON errors),
`openapi` for the document and its reference page. Handlers are thin: they validate with
the pydantic models of `schemas` and call the domain functions the CLI and pages call."""

from __future__ import annotations

from app.web.api import (
    backfills,
    breakers,
    bulk_actions,
    catalog,
    notifications,
    openapi,
    queues,
    runs,
    schedules,
)

routes = [*openapi.routes, *bulk_actions.routes, *runs.routes, *schedules.routes,
          *backfills.routes, *catalog.routes, *queues.routes, *breakers.routes,
          *notifications.routes]  # fmt: skip
