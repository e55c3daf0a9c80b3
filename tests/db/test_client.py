"""The Python client reads a run back through its named query."""

from __future__ import annotations

from app.client import Sundial


def test_get_returns_the_row_of_a_submitted_run_and_none_for_an_unknown_id(db_url: str) -> None:
    with Sundial(db_url) as client:
        run_id = client.submit("noop", {"n": 1}, priority=7)
        row = client.get(run_id)
        missing = client.get(run_id + 1)
    assert row is not None
    assert (row["id"], row["handler"], row["args"], row["priority"], row["status"]) == (
        run_id,
        "noop",
        {"n": 1},
        7,
        "pending",
    )
    assert missing is None
