"""DAG runs pages through the real application."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.dags import dag_submission
from app.runs import transitions
from app.runs.run_inserts import NewRun


def test_the_list_links_to_a_picture_that_polls_while_steps_remain(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        dag = dag_submission.submit_dag(
            conn, {"a": NewRun("noop"), "<b>b</b>": NewRun("noop")}, [("a", "<b>b</b>")],
            name="nightly <i>load</i>",
        )  # fmt: skip
    client = as_role("viewer")
    listing = client.get("/dag-runs")
    assert f'href="/dag-runs/{dag.id}"' in listing.text
    assert "nightly &lt;i&gt;load&lt;/i&gt;" in listing.text and "0 of 2 completed" in listing.text
    page = client.get(f"/dag-runs/{dag.id}")
    assert "dag-node status-pending" in page.text and "dag-node status-blocked" in page.text
    assert "&lt;b&gt;b&lt;/b&gt;" in page.text and 'hx-trigger="sse:runs"' in page.text
    assert f'href="/runs/{dag.run_ids["a"]}"' in page.text
    fragment = client.get(f"/dag-runs/{dag.id}", headers={"HX-Request": "true"})
    assert "<html" not in fragment.text and 'id="dag-run-graph"' in fragment.text
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        transitions.cancel_dag(conn, dag.id)
    assert "hx-trigger" not in client.get(f"/dag-runs/{dag.id}").text  # nothing left to run
    assert client.get("/dag-runs/00000000-0000-0000-0000-000000000000").status_code == 404
    assert client.get("/dag-runs?before=yesterday").status_code == 422


def test_the_dag_run_page_shows_where_the_time_went_in_bars_and_words(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    from datetime import timedelta

    from app.handlers.jobs import Outcome, OutcomeStatus
    from app.runs.transitions import Finish

    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        dag = dag_submission.submit_dag(
            conn, {"extract": NewRun("noop"), "load": NewRun("noop", max_retries=1)},
            [("extract", "load")], name="nightly",
        )  # fmt: skip
        row = conn.execute("SELECT created_at FROM job_runs WHERE id = %s",
                           (dag.run_ids["extract"],)).fetchone()  # fmt: skip
        assert row is not None
        t0 = row["created_at"]

        def step(claim_at: float, end_at: float, outcome: Outcome) -> None:
            (c,) = transitions.claim(conn, "w", 1, 300, now=t0 + timedelta(seconds=claim_at))
            transitions.finish_many(conn, "w", [Finish(c.run_id, c.attempt, outcome)],
                                    now=t0 + timedelta(seconds=end_at))  # fmt: skip

        step(1, 4, Outcome.completed())
        step(4, 7, Outcome(OutcomeStatus.FAILED, error="busy", retryable=True))
        step(10, 22, Outcome.completed())
    page = as_role("viewer").get(f"/dag-runs/{dag.id}")
    assert "Where the time went" in page.text and "22 s in all" in page.text
    assert "extract → load" in page.text  # the longest chain, in words
    assert ("load: waited 4 s for the steps before it, ran 15 s, 1 retry (2 attempts, 1 failed),"
            " waited 3 s to try again") in page.text  # fmt: skip
    assert 'class="gantt-failed" x="18.182%" y="3" width="13.636%"' in page.text  # 4..7 of 22 s
    assert "an attempt that failed" in page.text and "waiting to try again" in page.text
    assert "attempt 1: failed, 3 s" in page.text
