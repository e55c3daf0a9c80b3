"""The run page says by when a run must start, and why it was skipped when it did not."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.testclient import TestClient

from app.runs import submission, transitions
from app.runs.run_inserts import NewRun


def test_the_run_page_says_when_a_run_must_start_and_why_it_was_skipped(
    as_role: Callable[[str], TestClient], conn: Any
) -> None:
    deadline = datetime.now(UTC) + timedelta(minutes=1)
    run_id = submission.submit(conn, NewRun("noop", deadline=deadline)).id
    viewer = as_role("viewer")
    page = viewer.get(f"/runs/{run_id}")
    assert "Must start by" in page.text
    transitions.expire(conn, now=deadline)
    page = viewer.get(f"/runs/{run_id}")
    assert "Skipped because" in page.text and "it had not started by its deadline" in page.text
