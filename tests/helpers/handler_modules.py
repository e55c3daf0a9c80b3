"""Handler modules the worker's fault tests load."""

from __future__ import annotations

BOTH_HANDLER_MODULES = "tests.helpers.worker_handlers,tests.helpers.fixtures_handlers"
