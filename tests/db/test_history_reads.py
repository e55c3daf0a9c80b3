"""A run that moved to the history (app.runs.history) reads the same at every door that
reads ended runs: the client, the runs list and its search, its logs and events, its DAG
run, its dead-letter group, its schedule's streak. What would change it (retry, cancel, a
new run waiting on it) says in words that it is in the history."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from app.catalog import job_definitions, workflows
from app.catalog.job_definitions import JobSpec
from app.client import Sundial
from app.core.config import Settings
from app.dags import dag_runs, dag_submission, dag_timeline
from app.dags.dag_graph import DagError
from app.handlers.jobs import Outcome, OutcomeStatus
from app.observability import job_durations, lag_slo
from app.runs import (
    bulk_actions,
    dead_letters,
    moved_runs,
    run_actions,
    run_list,
    run_logs,
    run_reads,
    run_timeline,
    submission,
    transitions,
)
from app.runs.run_inserts import NewRun
from app.services.reaper import Reaper
from app.services.trigger import Trigger
from tests.helpers.dead_letters import declined
from tests.helpers.job_stats import ended
from tests.helpers.processes import finish_run
from tests.helpers.schedules import add, define_etl
from tests.helpers.waits import db_now, utc

Conn = psycopg.Connection[Any]
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def move(conn: Conn, later: timedelta = 2 * HOUR) -> None:
    """The reaper's move, as if `later` had passed since the runs ended."""
    keeper = Reaper(Settings.from_env({}))
    assert keeper.move_to_history(conn, db_now(conn) + later).runs


def in_history(conn: Conn, run_id: int) -> bool:
    row = conn.execute("SELECT count(*) AS n FROM run_history WHERE id = %s", (run_id,))
    hot = conn.execute("SELECT count(*) AS n FROM job_runs WHERE id = %s", (run_id,))
    return (row.fetchone(), hot.fetchone()) == ({"n": 1}, {"n": 0})


def moved_run(conn: Conn, args: dict[str, Any]) -> int:
    """A run that ran, logged a line and completed, then moved to the history."""
    run_id = submission.submit(conn, NewRun("noop", args)).id
    finish_run(conn, run_id, Outcome.completed({"rows": 3}))
    conn.execute("INSERT INTO run_logs VALUES (%s, 1, 1, now(), 'stdout', 'hello')", (run_id,))
    return run_id


def test_a_moved_run_reads_the_same_in_the_client_lists_search_logs_and_events(
    conn: Conn,
) -> None:
    run_id = moved_run(conn, {"customer_id": 42})
    other = moved_run(conn, {"customer_id": 7})
    waiting = submission.submit(conn, NewRun("noop", {"customer_id": 42})).id
    move(conn)
    assert in_history(conn, run_id) and in_history(conn, other)

    detail = run_reads.run_with_attempts(conn, run_id)
    assert detail is not None and detail.status == "completed" and detail.result == {"rows": 3}
    assert [a.outcome for a in detail.attempts] == ["completed"]

    def listed(**where: Any) -> list[int]:
        page = run_list.list_runs(conn, run_list.RunFilter(**where).check())
        return [r["id"] for r in page.runs]

    assert listed() == [waiting, other, run_id]  # newest first, hot and history merged
    assert listed(status="completed") == [other, run_id]
    assert listed(job="noop", before_id=other) == [run_id]
    assert listed(search="customer_id = 42") == [waiting, run_id]
    assert listed(search="result.rows = 3") == [other, run_id]
    assert run_list.count_matching(conn, run_list.RunFilter(search="customer_id = 42")) == (
        2,
        waiting,
    )

    assert [line["line"] for line in run_logs.lines_of(conn, run_id)] == ["hello"]
    summary = run_logs.run_summary(conn, run_id)
    assert summary is not None and summary["status"] == "completed"
    events = run_timeline.events_of_run(conn, run_id)
    assert events is not None
    kinds = [e.kind for e in events]
    assert kinds[0] == "submitted" and "started" in kinds and kinds[-1] == "completed"


def random_page_cost(conn: Conn) -> str:
    row = conn.execute("SELECT current_setting('random_page_cost') AS cost").fetchone()
    assert row is not None
    return str(row["cost"])


def test_a_search_is_planned_at_its_own_price_of_a_random_read_and_leaves_it_behind(
    conn: Conn,
) -> None:
    # At PostgreSQL's default price (a spinning disk's), a search over a month of history
    # walked every day's id index (bench.history_scale); the price holds for the search only.
    run_id = moved_run(conn, {"customer_id": 42})
    moved_run(conn, {"customer_id": 7})
    move(conn)
    default = random_page_cost(conn)
    assert default != run_list.SEARCH_RANDOM_PAGE_COST

    search = run_list.filter_params(conn, run_list.RunFilter(search="customer_id = 42"))
    with run_list.planned(conn, search):
        assert random_page_cost(conn) == run_list.SEARCH_RANDOM_PAGE_COST
    assert random_page_cost(conn) == default  # the pooled connection goes back as it came
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE

    plain = run_list.filter_params(conn, run_list.RunFilter(status="completed"))
    with run_list.planned(conn, plain):  # no search: no transaction of its own either
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert random_page_cost(conn) == default

    page = run_list.list_runs(conn, run_list.RunFilter(search="customer_id = 42"))
    assert [r["id"] for r in page.runs] == [run_id]
    assert run_list.matching_ids(
        conn, run_list.RunFilter(search="customer_id = 42"), before_id=None, limit=10
    ) == [run_id]
    assert random_page_cost(conn) == default


def test_acting_on_a_moved_run_says_it_is_in_the_history(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop", max_retries=0)).id
    finish_run(conn, run_id, Outcome(OutcomeStatus.CANCELLED))
    move(conn)

    for act in (run_actions.retry, run_actions.cancel):
        with pytest.raises(run_actions.RunInHistory) as refused:
            act(conn, run_id, actor="ops")
        assert f"Run {run_id} ended at " in str(refused.value)
        assert "is in the history now" in str(refused.value)
        assert str(refused.value).endswith("re-run it instead.")
    with pytest.raises(DagError) as waiting:
        dag_submission.submit_after(conn, NewRun("noop"), [run_id])
    assert f"cannot run after run {run_id}: run {run_id} ended at " in str(waiting.value)
    assert "in the history" in str(waiting.value)
    with pytest.raises(DagError, match="there is no such run"):
        dag_submission.submit_after(conn, NewRun("noop"), [run_id + 1000])
    assert moved_runs.in_history(conn, run_id + 1000) is None
    audited = conn.execute("SELECT count(*) AS n FROM audit_log WHERE target_type = 'run'")
    assert audited.fetchone() == {"n": 0}


def test_the_python_client_says_a_moved_dead_letter_is_in_the_history(db_url: str) -> None:
    with Sundial(db_url) as client:
        run_id = submission.submit(client.conn, NewRun("noop", max_retries=0)).id
        finish_run(client.conn, run_id, Outcome(OutcomeStatus.FAILED, error="boom"))
        move(client.conn, 8 * DAY)
        said = f"Run {run_id} ended at .* in the history now"
        with pytest.raises(run_actions.RunInHistory, match=said):
            client.retry(run_id)
        assert client.cancel(run_id) is None  # it ended: nothing to cancel
        assert client.retry(run_id + 1000) is False  # no such run
        assert client.get(run_id) is not None  # still read, as every door reads it


def test_a_moved_run_is_re_run_with_its_arguments_and_a_bulk_retry_skips_it(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop", {"customer_id": 42}, max_retries=0)).id
    finish_run(conn, run_id, Outcome(OutcomeStatus.FAILED, error="boom", retryable=False))
    move(conn, 8 * DAY)
    picked = bulk_actions.Selection(run_ids=(run_id,))
    for verb in (bulk_actions.BulkVerb.RETRY, bulk_actions.BulkVerb.RERUN):
        action = bulk_actions.start(conn, verb, picked, actor="ops", owner="o")
        while bulk_actions.run_batch(conn, action, owner="o"):
            pass
    rows = conn.execute("SELECT id, status, args FROM job_runs ORDER BY id").fetchall()
    assert [(r["status"], r["args"]) for r in rows] == [("pending", {"customer_id": 42})]
    assert rows[0]["id"] != run_id and in_history(conn, run_id)
    done = conn.execute("SELECT action, done, skipped FROM bulk_actions ORDER BY id").fetchall()
    assert [(d["action"], d["done"], d["skipped"]) for d in done] == [
        ("retry", 0, 1),
        ("rerun", 1, 0),
    ]


def test_a_moved_dag_run_reads_whole_on_its_page_and_timeline(conn: Conn) -> None:
    dag = dag_submission.submit_dag(
        conn, {"extract": NewRun("noop"), "load": NewRun("noop")}, [("extract", "load")],
        name="nightly",
    )  # fmt: skip
    finish_run(conn, dag.run_ids["extract"], Outcome.completed())
    finish_run(conn, dag.run_ids["load"], Outcome.completed())
    move(conn)
    assert in_history(conn, dag.run_ids["load"])

    picture = dag_runs.picture(conn, dag.id)
    assert picture is not None and not picture.live and picture.dag_run["name"] == "nightly"
    assert [(s["dag_node"], s["status"]) for s in picture.steps] == [
        ("extract", "completed"),
        ("load", "completed"),
    ]
    [listed] = dag_runs.recent(conn)
    assert (listed["id"], listed["total"], listed["completed"]) == (dag.id, 2, 2)
    drawn = dag_timeline.load(conn, dag.id)
    assert drawn is not None
    assert [(b.name, b.upstreams) for b in drawn.bars] == [("extract", ()), ("load", ("extract",))]
    events = run_timeline.events_of_run(conn, dag.run_ids["load"])
    assert events is not None and "released" in [e.kind for e in events]


def test_a_workflows_page_shows_its_newest_dag_run_after_it_moved(conn: Conn) -> None:
    define_etl(conn)
    dag = workflows.run_now(conn, "etl")
    for step in ("extract", "load"):
        finish_run(conn, dag.run_ids[step], Outcome.completed())
    move(conn)
    assert in_history(conn, dag.run_ids["load"])
    last = workflows.detail(conn, "etl")["last_run"]
    assert last is not None and last["id"] == dag.id
    assert {step: s["status"] for step, s in last["steps"].items()} == {
        "extract": "completed",
        "load": "completed",
    }


def test_moved_dead_letters_stay_in_their_group_but_no_retry_reaches_them(conn: Conn) -> None:
    old = [declined(conn, order) for order in range(2)]
    move(conn, 8 * DAY)  # dead letters stay hot for a week, then move too
    assert all(in_history(conn, r) for r in old)
    recent = declined(conn, 2)

    [group] = dead_letters.groups(conn)
    assert (group.runs, group.sample_run_id) == (3, recent)
    assert [r["id"] for r in dead_letters.group_runs(conn, group.fingerprint)] == [
        recent,
        *reversed(old),
    ]
    counted = dead_letters.group_count(conn, group.fingerprint)  # the dry run: one hot
    assert (counted.runs, counted.hot, counted.retryable, counted.in_history) == (3, 1, 1, 2)
    assert dead_letters.retry_group(conn, group.fingerprint, actor="ops") == 1
    assert dead_letters.group_count(conn, group.fingerprint) == dead_letters.GroupCount(2, 0)
    said = conn.execute("SELECT details FROM audit_log WHERE action = %s",
                        ["dead_letters.retry_group"]).fetchone()  # fmt: skip
    assert said is not None
    assert (said["details"]["before"], said["details"]["after"]) == (
        {"runs": 3, "in_history": 2}, {"retried": 1})  # fmt: skip
    assert dead_letters.retry_runs(conn, old, actor="ops") == []
    with pytest.raises(dead_letters.DeadLetterError, match="is in the history now"):
        dead_letters.retry_with_args(conn, old[0], {"order": 9}, actor="ops")


def test_a_jobs_slowest_runs_include_those_in_the_history(conn: Conn) -> None:
    job_definitions.create(conn, JobSpec(name="report", handler="noop"), actor="test")
    job_id = job_definitions.get(conn, "report")["id"]
    hour = db_now(conn).replace(minute=0, second=0, microsecond=0) - 5 * HOUR
    slow = ended(conn, "noop", 30, at=hour + timedelta(minutes=10), job_id=job_id)
    quick = ended(conn, "noop", 2, at=hour + timedelta(minutes=20), job_id=job_id)
    read_at = hour + 2 * HOUR
    assert [s.run_id for s in job_durations.durations(conn, job_id, now=read_at).slowest] == [
        slow,
        quick,
    ]  # the roll-up counted them while they were hot
    move(conn)
    assert in_history(conn, slow) and in_history(conn, quick)
    after = job_durations.durations(conn, job_id, now=read_at)
    assert [(s.run_id, round(s.seconds)) for s in after.slowest] == [(slow, 30), (quick, 2)]


def test_the_lag_breakdown_counts_fires_whose_runs_moved(conn: Conn) -> None:
    start = db_now(conn)
    add(conn, "every minute", now=start, cron="* * * * *")
    lag_slo.set_threshold(conn, "every minute", 60, actor="alice")
    first = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    trigger = Trigger(Settings.from_env({}), holder="t")
    for i, wait in enumerate((5, 90)):
        fire = first + i * timedelta(minutes=1)
        trigger.run_once(conn, now=fire + timedelta(seconds=1))
        (job,) = transitions.claim(conn, "w", 1, 30, now=fire + timedelta(seconds=wait))
        done = transitions.Finish(job.run_id, job.attempt, Outcome.completed())
        transitions.finish_many(conn, "w", [done], now=fire + timedelta(seconds=wait + 2))
    move(conn)
    assert conn.execute("SELECT count(*) AS n FROM job_runs").fetchone() == {"n": 0}
    (lag,) = lag_slo.report(conn, now=first + 3 * timedelta(minutes=1)).schedules
    assert (lag.fires, lag.breaches) == (2, 1)
    claims = {s.label: s for s in lag.stages}["enqueue → claim"]
    assert claims.p95 is not None and round(claims.p95) > 80


def test_a_success_that_moved_still_ends_a_schedules_failing_streak(conn: Conn) -> None:
    """fail, complete, fail with auto-pause after 2: the success moves after an hour, the
    failures stay hot for a week; the streak must still see the success between them."""
    add(conn, "flaky", cron="* * * * *", auto_pause_after=2)
    trigger = Trigger(Settings.from_env({}))
    failed = Outcome(OutcomeStatus.FAILED, error="boom", retryable=False)
    for minute, outcome in enumerate([failed, Outcome.completed(), failed]):
        trigger.run_once(conn, now=utc("2026-05-01T10:00:10") + minute * timedelta(minutes=1))
        (job,) = transitions.claim(conn, "w", 10, 30)
        transitions.finish_many(conn, "w", [transitions.Finish(job.run_id, job.attempt, outcome)])
    move(conn)
    statuses = conn.execute("SELECT status FROM job_runs ORDER BY fire_time").fetchall()
    assert [r["status"] for r in statuses] == ["failed", "failed"]
    assert trigger.auto_pause(conn) == 0
    row = conn.execute("SELECT active FROM schedules").fetchone()
    assert row == {"active": True}
