"""Circuit breakers and retry budgets per dependency against a real PostgreSQL: a breaker
opens when its dependency's calls fail past the threshold, its runs wait (attempt unspent,
none fails because of it), trial runs go after the cool-off, success closes it, and an
operator can open or close it by hand; every change is audited."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from app.catalog import job_definitions
from app.catalog.job_fields import JobSpec
from app.handlers.jobs import ClaimedRun, Outcome, OutcomeStatus
from app.runs import breakers, dependency_calls, submission, transitions
from app.runs.breakers import BreakerError
from app.runs.run_inserts import NewRun

Conn = psycopg.Connection[Any]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    dependency_calls.forget()


def _job(conn: Conn, name: str, *dependencies: str, max_retries: int = 0) -> Any:
    spec = JobSpec.model_construct(name=name, handler="noop", dependencies=list(dependencies),
                                   max_retries=max_retries)  # fmt: skip
    job_definitions.create(conn, spec, actor="alice")
    return job_definitions.get(conn, name)["id"]


def _submit(conn: Conn, job_id: Any, count: int, max_retries: int = 0) -> list[int]:
    runs = [NewRun("noop", job_id=job_id, max_retries=max_retries)] * count
    return [s.id for s in submission.submit_many(conn, runs)]


def _claim(conn: Conn, limit: int = 100, now: datetime | None = None) -> list[ClaimedRun]:
    return transitions.claim(conn, "w", limit, 30.0, now=now)


def _end(conn: Conn, runs: list[ClaimedRun], ok: bool, now: datetime | None = None) -> None:
    outcome = Outcome.completed() if ok else Outcome(OutcomeStatus.FAILED, error="503 from it")
    finishes = [transitions.Finish(r.run_id, r.attempt, outcome) for r in runs]
    transitions.finish_many(conn, "w", finishes, now=now)


def _state(conn: Conn, name: str = "payments-api") -> str:
    return str(
        conn.execute("SELECT state FROM dependencies WHERE name = %s", [name]).fetchone()["state"]
    )  # type: ignore[index]


def _clock(conn: Conn) -> datetime:
    return conn.execute("SELECT now() AS t").fetchone()["t"]  # type: ignore[index]


def test_naming_a_dependency_makes_a_closed_breaker_with_default_settings(conn: Conn) -> None:
    _job(conn, "charge", "payments-api", "ledger")
    (ledger, payments) = breakers.overview(conn)
    assert (ledger.name, payments.name) == ("ledger", "payments-api")
    assert (payments.state, payments.failure_threshold, payments.min_calls) == ("closed", 0.5, 5)
    assert job_definitions.get(conn, "charge")["dependencies"] == ["payments-api", "ledger"]


def test_failures_open_the_breaker_and_its_runs_wait_while_others_go(conn: Conn) -> None:
    charge = _job(conn, "charge", "payments-api")
    other = _job(conn, "report")
    _submit(conn, charge, 5)
    _end(conn, _claim(conn), ok=False)  # five calls, all failed (no retries: all failed)
    assert breakers.evaluate(conn)[0][1].to == "open"
    assert _state(conn) == "open"
    waiting = _submit(conn, charge, 3)
    going = _submit(conn, other, 2)
    assert sorted(r.run_id for r in _claim(conn)) == going
    rows = conn.execute("SELECT status, attempt FROM job_runs WHERE id = ANY(%s)", [waiting])
    assert {(r["status"], r["attempt"]) for r in rows} == {("pending", 0)}
    audit = conn.execute("SELECT actor, details FROM audit_log WHERE action = 'dependency.open'")
    row = audit.fetchone()
    assert row["actor"] == "sundial"  # type: ignore[index]
    assert row["details"]["after"]["reason"] == "5 of its last 5 calls failed"  # type: ignore[index]


def test_a_run_failing_while_the_breaker_is_open_waits_with_its_attempt_unspent(
    conn: Conn,
) -> None:
    charge = _job(conn, "charge", "payments-api")
    (run_id,) = _submit(conn, charge, 1, max_retries=0)
    in_flight = _claim(conn)
    breakers.open_by_hand(conn, "payments-api", actor="alice", note="their status page: down")
    _end(conn, in_flight, ok=False)  # no retries left, yet it does not fail
    row = conn.execute("SELECT status, attempt, retry_base, run_at FROM job_runs WHERE id = %s",
                       [run_id]).fetchone()  # fmt: skip
    assert row is not None and (row["status"], row["attempt"] - row["retry_base"]) == ("pending", 0)


def test_trial_runs_go_after_the_cool_off_and_success_closes_the_breaker(conn: Conn) -> None:
    charge = _job(conn, "charge", "payments-api")
    breakers.set_settings(conn, "payments-api", actor="alice", min_calls=2, probes=2,
                          cool_off_seconds=10)  # fmt: skip
    _submit(conn, charge, 2)
    _end(conn, _claim(conn), ok=False)
    breakers.evaluate(conn)
    backlog = _submit(conn, charge, 10)
    assert _claim(conn) == []
    later = _clock(conn) + timedelta(seconds=11)
    assert [c.to for _, c in breakers.evaluate(conn, now=later)] == ["half_open"]
    trials = _claim(conn, now=later)
    assert [t.run_id for t in trials] == backlog[:2]  # the oldest, and only the trial runs
    assert _claim(conn, now=later) == []
    _end(conn, trials[:1], ok=True, now=later)
    assert breakers.evaluate(conn, now=later) == []  # one trial still running
    _end(conn, trials[1:], ok=True, now=later)
    assert [c.to for _, c in breakers.evaluate(conn, now=later)] == ["closed"]
    assert len(_claim(conn, now=later)) == 8


def test_a_failed_trial_opens_the_breaker_again(conn: Conn) -> None:
    charge = _job(conn, "charge", "payments-api")
    breakers.set_settings(conn, "payments-api", actor="alice", min_calls=1, probes=1,
                          cool_off_seconds=5)  # fmt: skip
    _submit(conn, charge, 1)
    _end(conn, _claim(conn), ok=False)
    breakers.evaluate(conn)
    (trial_id,) = _submit(conn, charge, 1, max_retries=0)
    later = _clock(conn) + timedelta(seconds=6)
    breakers.evaluate(conn, now=later)
    trial = _claim(conn, now=later)
    _end(conn, trial, ok=False, now=later)
    assert [c.to for _, c in breakers.evaluate(conn, now=later)] == ["open"]
    status = conn.execute("SELECT status FROM job_runs WHERE id = %s", [trial_id]).fetchone()
    assert status == {"status": "pending"}  # deferred again, not failed


def test_an_operator_opens_a_breaker_until_closing_it_by_hand(conn: Conn) -> None:
    charge = _job(conn, "charge", "payments-api")
    _submit(conn, charge, 2)
    breakers.open_by_hand(conn, "payments-api", actor="alice", note="maintenance")
    much_later = _clock(conn) + timedelta(days=1)
    assert breakers.evaluate(conn, now=much_later) == []
    assert _claim(conn, now=much_later) == []
    with pytest.raises(BreakerError, match="already open"):
        breakers.open_by_hand(conn, "payments-api", actor="alice")
    breakers.close_by_hand(conn, "payments-api", actor="bob")
    assert len(_claim(conn)) == 2
    actions = conn.execute(
        "SELECT actor, action FROM audit_log WHERE target_type = 'dependency' ORDER BY id"
    ).fetchall()
    assert [(a["actor"], a["action"]) for a in actions] == [
        ("alice", "dependency.open"), ("bob", "dependency.closed")]  # fmt: skip
    with pytest.raises(BreakerError, match="no job names a dependency called 'nope'"):
        breakers.open_by_hand(conn, "nope", actor="alice")


def test_a_spent_retry_budget_holds_retries_back_but_not_first_attempts(conn: Conn) -> None:
    charge = _job(conn, "charge", "payments-api")
    breakers.set_settings(conn, "payments-api", actor="alice", retry_budget=0.1,
                          failure_threshold=1.0, min_calls=1000)  # fmt: skip
    _submit(conn, charge, 20, max_retries=5)
    first = _claim(conn)
    _end(conn, first[:3], ok=False)  # three first attempts failed: they retry
    _end(conn, first[3:], ok=True)
    conn.execute("UPDATE job_runs SET run_at = now() WHERE status = 'pending'")
    retries = _claim(conn)
    assert len(retries) == 3
    _end(conn, retries, ok=False)  # 3 retries >= max(3, 10 % of 20 first attempts)
    breakers.evaluate(conn)
    assert conn.execute("SELECT retries_held FROM dependencies").fetchone() == {
        "retries_held": True
    }
    conn.execute("UPDATE job_runs SET run_at = now() WHERE status = 'pending'")
    fresh = _submit(conn, charge, 2)
    assert sorted(r.run_id for r in _claim(conn)) == fresh  # the retries wait


@pytest.mark.parametrize(
    ("settings", "field", "message"),
    [
        ({"failure_threshold": 1.5}, "failure_threshold", "a share from 0 to 1"),
        ({"failure_threshold": 0}, "failure_threshold", "must be above 0"),
        ({"min_calls": 0}, "min_calls", "the fewest calls to judge by must be between 1"),
        ({"cool_off_seconds": 2.5}, "cool_off_seconds", "must be a whole number"),
        ({"probes": 1001}, "probes", "the trial runs must be between 1 and 1,000"),
        ({"retry_budget": -0.1}, "retry_budget", "a share from 0 to 1"),
        ({"window": 5}, "window", "unknown setting 'window'"),
    ],
)
def test_bad_breaker_settings_are_refused_and_change_nothing(
    conn: Conn, settings: dict[str, Any], field: str, message: str
) -> None:
    _job(conn, "charge", "payments-api")
    with pytest.raises(BreakerError, match=message) as refused:
        breakers.set_settings(conn, "payments-api", actor="alice", **settings)
    assert refused.value.field == field
    (b,) = breakers.overview(conn)
    assert (b.failure_threshold, b.min_calls, b.probes) == (0.5, 5, 3)


def test_a_job_names_at_most_twenty_dependencies_each_a_name(conn: Conn) -> None:
    with pytest.raises(job_definitions.JobError, match="at most 20 dependencies"):
        _job(conn, "many", *[f"d{i}" for i in range(21)])
    with pytest.raises(job_definitions.JobError, match="a dependency's name cannot be empty"):
        _job(conn, "blank", "  ")
    assert breakers.overview(conn) == []


def test_the_cli_names_dependencies_and_sets_opens_and_closes_breakers(
    db_url: str, conn: Conn
) -> None:
    from tests.helpers.commands import run_sundial

    added = run_sundial(db_url, "job", "add", "charge", "--handler", "noop",
                        "--dependency", "payments-api")  # fmt: skip
    assert added.returncode == 0, added.stderr
    done = run_sundial(db_url, "breaker", "set", "payments-api", "--threshold", "40%",
                       "--probes", "2", "--retry-budget", "0.1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "payments-api: opens at 40% of at least 5 calls in 60 s; 2 trial runs after 30 s; "
        "retries up to 10% of first calls in 300 s"
    )
    opened = run_sundial(db_url, "breaker", "open", "payments-api", "--note", "maintenance")
    assert opened.returncode == 0 and _state(conn) == "open"
    listed = run_sundial(db_url, "breaker", "list")
    assert "payments-api\topen (by hand)\t" in listed.stdout
    for args, message in [
        (["open", "payments-api"], "payments-api's breaker is already open"),
        (["set", "payments-api", "--threshold", "2"], "must be a share from 0 to 1"),
        (["set", "payments-api", "--threshold", "half"], "a share like 0.5 or 50%"),
        (["close", "nope"], "no job names a dependency called 'nope'"),
    ]:
        refused = run_sundial(db_url, "breaker", *args)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
    closed = run_sundial(db_url, "breaker", "close", "payments-api")
    assert closed.returncode == 0 and _state(conn) == "closed"


def test_the_api_lists_sets_opens_and_closes_breakers(db_url: str, conn: Conn) -> None:
    from tests.helpers.api_client import api_as

    _job(conn, "charge", "payments-api")
    with api_as(db_url, "operator") as api:
        listed = api.get("/api/v1/breakers").json()["breakers"]
        assert [(b["name"], b["state"]) for b in listed] == [("payments-api", "closed")]
        saved = api.put("/api/v1/breakers/payments-api", json={"min_calls": 10, "probes": 1})
        assert saved.status_code == 200, saved.text
        assert (saved.json()["min_calls"], saved.json()["probes"]) == (10, 1)
        for body in ({"failure_threshold": 1.5}, {"probes": "2"}, {"window": 5}):
            assert api.put("/api/v1/breakers/payments-api", json=body).status_code == 422, body
        opened = api.post("/api/v1/breakers/payments-api/open", json={"note": "down"})
        assert opened.status_code == 200 and opened.json()["state"] == "open"
        assert opened.json()["manual"] is True and opened.json()["note"] == "down"
        again = api.post("/api/v1/breakers/payments-api/open", json={})
        assert again.status_code == 422 and "already open" in again.text
        missing = api.post("/api/v1/breakers/nope/close", json={})
        assert missing.status_code == 404
        closed = api.post("/api/v1/breakers/payments-api/close", json={})
        assert closed.json()["state"] == "closed"
        paths = api.get("/api/v1/openapi.json").json()["paths"]
        assert {"/api/v1/breakers", "/api/v1/breakers/{name}/open"} <= set(paths)
    with api_as(db_url, "viewer") as viewer:
        assert viewer.post("/api/v1/breakers/payments-api/open", json={}).status_code == 403
        jobs = viewer.get("/api/v1/jobs").json()
        assert "payments-api" in str(jobs)
