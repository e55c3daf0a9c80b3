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
