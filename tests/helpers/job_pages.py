"""The job editor's form, filled in as a person would."""

from __future__ import annotations

FORM = {"name": "nightly", "handler": "noop", "args": '{"a": 1}', "execution_model": "async",
        "priority": "1", "timeout_seconds": "60", "max_retries": "2"}  # fmt: skip
