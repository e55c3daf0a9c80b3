"""A DAG run's timeline read from real runs moved by the real transitions (claim, fail with
a retry, complete), with `now=` placing each one on the clock."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

from app.dags import dag_submission, dag_timeline
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import transitions
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish

Conn = psycopg.Connection[Any]


def _claim_one(conn: Conn, at: datetime) -> transitions.ClaimedRun:
    (claimed,) = transitions.claim(conn, "w", 10, 300, now=at)
    return claimed


def _complete(conn: Conn, claimed: transitions.ClaimedRun, at: datetime) -> None:
    done = Finish(claimed.run_id, claimed.attempt, Outcome.completed())
    assert transitions.finish_many(conn, "w", [done], now=at)


def _spans(chart: dag_timeline.Timeline, name: str, t0: datetime) -> list[tuple[Any, ...]]:
    (bar,) = [b for b in chart.bars if b.name == name]
    return [
        (s.kind, (s.start - t0).total_seconds(), (s.end - t0).total_seconds(), s.attempt)
        for s in bar.segments
    ]


def test_each_step_waits_queues_runs_and_retries_where_the_transitions_put_it(
    conn: Conn,
) -> None:
    dag = dag_submission.submit_dag(
        conn,
        {"extract": NewRun("noop"), "load": NewRun("noop", max_retries=2),
         "report": NewRun("noop")},
        [("extract", "load"), ("load", "report")],
        name="nightly",
    )  # fmt: skip
    t0 = conn.execute(
        "SELECT created_at FROM job_runs WHERE id = %s", (dag.run_ids["extract"],)
    ).fetchone()["created_at"]  # type: ignore[index]

    def at(seconds: float) -> datetime:
        return t0 + timedelta(seconds=seconds)

    _complete(conn, _claim_one(conn, at(2)), at(5))  # extract
    load = _claim_one(conn, at(6))
    failure = Outcome(OutcomeStatus.FAILED, error="database busy", retryable=True)
    assert transitions.finish_many(conn, "w", [Finish(load.run_id, load.attempt, failure)],
                                   now=at(9))  # fmt: skip
    _complete(conn, _claim_one(conn, at(20)), at(30))  # load, second attempt

    chart = dag_timeline.load(conn, dag.id, now=at(31))
    assert chart is not None and chart.live and chart.end == at(31)
    assert _spans(chart, "extract", t0) == [("queued", 0, 2, None), ("ran", 2, 5, 1)]
    assert _spans(chart, "load", t0) == [
        ("waiting", 0, 5, None),  # until extract completed
        ("queued", 5, 6, None),
        ("failed", 6, 9, 1),
        ("retrying", 9, 20, None),
        ("ran", 20, 30, 2),
    ]
    assert _spans(chart, "report", t0) == [("waiting", 0, 30, None), ("queued", 30, 31, None)]
    assert chart.bars[2].segments[-1].open

    report = _claim_one(conn, at(32))
    mid = dag_timeline.load(conn, dag.id, now=at(36))
    assert mid is not None
    assert _spans(mid, "report", t0)[-1] == ("ran", 32, 36, 1)  # running: until now
    _complete(conn, report, at(40))

    done = dag_timeline.load(conn, dag.id, now=at(500))
    assert done is not None and not done.live and done.seconds == 40.0
    assert done.critical_path == ("extract", "load", "report")
    assert [(b.name, b.retries, b.failed_attempts) for b in done.bars] == [
        ("extract", 0, 0), ("load", 1, 1), ("report", 0, 0),
    ]  # fmt: skip
    load_bar = done.bars[1]
    assert [(s.left, s.width) for s in load_bar.segments][2] == (15.0, 7.5)  # 6..9 of 40 s
    assert dag_timeline.load(conn, dag.id.__class__(int=0)) is None
