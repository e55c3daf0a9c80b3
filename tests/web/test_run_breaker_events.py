"""A run's page tells, in its history, what the circuit breakers of the services its job
calls did during its life (from the audit log), so people see why it waited; against a real
database and the real breaker rules."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from app.catalog import job_definitions
from app.catalog.job_fields import JobSpec
from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import breaker_events, breakers, dependency_calls, submission, transitions
from app.runs.run_inserts import NewRun

Conn = psycopg.Connection[Any]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    dependency_calls.forget()


def _job(conn: Conn, name: str, *dependencies: str) -> Any:
    spec = JobSpec.model_construct(name=name, handler="noop", dependencies=list(dependencies))
    job_definitions.create(conn, spec, actor="alice")
    return job_definitions.get(conn, name)["id"]


def _submit(conn: Conn, job_id: Any, count: int = 1) -> list[int]:
    runs = [NewRun("noop", job_id=job_id)] * count
    return [s.id for s in submission.submit_many(conn, runs)]


def _fail_all(conn: Conn) -> None:
    claimed = transitions.claim(conn, "w", 100, 30.0)
    failed = Outcome(OutcomeStatus.FAILED, error="503 from it")
    transitions.finish_many(conn, "w", [transitions.Finish(r.run_id, r.attempt, failed)
                                        for r in claimed])  # fmt: skip


def _history(page: str) -> list[str]:
    """The history's entries, as their first lines read."""
    timeline = page.split('<ol class="timeline events"')[1].split("</ol>")[0]
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", m)).strip()
            for m in re.findall(r"<strong[^>]*>(.*?)</strong>", timeline)]  # fmt: skip


def test_a_waiting_runs_page_says_its_service_was_paused_after_failures_and_by_whom(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    charge = _job(conn, "charge", "payments-api")
    _submit(conn, charge, 5)
    _fail_all(conn)  # five calls, all failed
    (waiting,) = _submit(conn, charge)
    breakers.evaluate(conn)  # the reaper's pass: the breaker opens
    breakers.close_by_hand(conn, "payments-api", actor="bob")
    breakers.open_by_hand(conn, "payments-api", actor="carol", note="their status page <b>")

    page = as_role("viewer").get(f"/runs/{waiting}").text
    assert _history(page) == [
        "Submitted",
        "payments-api paused after failures: 5 of its last 5 calls failed",
        "payments-api let through by bob; the runs that call it go",
        "payments-api paused by carol: their status page &lt;b&gt;; the runs that call it wait",
    ]
    assert 'class="event event-breaker service-event service-open"' in page
    assert "By bob" in page and "By carol" in page and "By Sundial" in page
    assert 'href="/queues#service-payments-api"' in page
    assert "Not started yet." in page


def test_only_the_runs_own_services_and_its_life_count(conn: Conn) -> None:
    charge = _job(conn, "charge", "payments-api")
    _job(conn, "mail", "smtp")
    breakers.open_by_hand(conn, "payments-api", actor="alice", note="before the run")
    (run,) = _submit(conn, charge)
    breakers.open_by_hand(conn, "smtp", actor="alice")  # not a service this job calls
    breakers.set_settings(conn, "payments-api", actor="alice", min_calls=9)  # not a change of state
    breakers.close_by_hand(conn, "payments-api", actor="alice", note="back")
    conn.execute("UPDATE job_runs SET status = 'cancelled', finished_at = now() WHERE id = %s",
                  [run])  # fmt: skip
    later = conn.execute("SELECT now() + interval '1 minute' AS t").fetchone()["t"]  # type: ignore[index]
    breakers.open_by_hand(conn, "payments-api", actor="alice", now=later)  # after it ended

    events = breaker_events.events_of_run(conn, run)
    assert [(e.dependency, e.state, e.words) for e in events] == [
        ("payments-api", "closed", "payments-api let through by alice: back; the runs that "
         "call it go"),
    ]  # fmt: skip


def test_a_run_of_a_job_that_calls_no_service_has_no_breaker_events(conn: Conn) -> None:
    report = _job(conn, "report")
    (run,) = _submit(conn, report)
    assert breaker_events.events_of_run(conn, run) == []
    direct = submission.submit_many(conn, [NewRun("noop")])[0].id
    assert breaker_events.events_of_run(conn, direct) == []


def test_retry_budget_and_trial_changes_in_words() -> None:
    row = {"dependency": "ledger", "actor": "sundial"}
    assert breaker_events.words({**row, "action": "dependency.half_open", "details": {}}) == (
        "ledger: its pause is over, a few trial runs go to see if it works again"
    )
    closed = {"after": {"reason": "its trial runs succeeded"}}
    assert breaker_events.words({**row, "action": "dependency.closed", "details": closed}) == (
        "ledger working again: its trial runs succeeded"
    )
    held = {"after": {"retries": 7, "first_calls": 20, "retry_budget": 0.1}}
    assert breaker_events.words({**row, "action": "dependency.retries_held", "details": held}) == (
        "ledger: retries wait, its retry budget is spent (7 retries for 20 first calls lately)"
    )
