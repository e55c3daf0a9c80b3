"""Fair share between a queue's keys against a real PostgreSQL: with one tenant's 2,000 runs
waiting and another's 10, the small tenant's runs start in the first claims, not after the
backlog; weights give a key more starts per turn; priorities hold within a key; bad
settings are refused at every door with a sentence."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest

from app.handlers.jobs import ClaimedRun
from app.runs import queues, transitions
from app.runs.queues import QueueError
from app.runs.run_inserts import NewRun
from app.runs.submission import submit_many
from tests.helpers.api_client import api_as
from tests.helpers.commands import run_sundial

Conn = psycopg.Connection[Any]


def _submit(conn: Conn, tenant: str | None, count: int, priority: int = 0) -> None:
    args = {} if tenant is None else {"tenant": tenant}
    submit_many(conn, [NewRun("noop", args=args, queue="q", priority=priority)] * count)


def _claim(conn: Conn, limit: int) -> list[ClaimedRun]:
    return transitions.claim(conn, "w", limit, 30.0, queue="q")


def _tenants(runs: list[ClaimedRun]) -> Counter[str | None]:
    return Counter(r.args.get("tenant") for r in runs)


def test_a_small_tenant_starts_at_once_behind_a_large_backlog(conn: Conn) -> None:
    _submit(conn, "a", 2000)
    _submit(conn, "b", 10)  # younger than every run of a
    queues.set_limits(conn, "q", actor="alice", key_field="tenant", fair_share=True)
    first = _claim(conn, 10)
    assert _tenants(first) == {"a": 5, "b": 5}  # turns: a, b, a, b ...
    second = _claim(conn, 10)
    assert _tenants(second) == {"a": 5, "b": 5}
    assert _tenants(_claim(conn, 10)) == {"a": 10}  # b has nothing left waiting


def test_without_fair_share_the_backlog_goes_first(conn: Conn) -> None:
    _submit(conn, "a", 200)
    _submit(conn, "b", 10)
    assert _tenants(_claim(conn, 20)) == {"a": 20}


def test_weights_give_a_key_more_starts_per_turn(conn: Conn) -> None:
    for tenant in ("a", "b", "c"):
        _submit(conn, tenant, 100)
    queues.set_limits(conn, "q", actor="alice", key_field="tenant", fair_share=True,
                      key_weights={"a": 3, "b": 2})  # fmt: skip
    assert _tenants(_claim(conn, 30)) == {"a": 15, "b": 10, "c": 5}


def test_many_keys_each_get_a_turn_before_any_gets_a_second(conn: Conn) -> None:
    for n in range(40):
        _submit(conn, f"t{n}", 3 if n else 300)
    queues.set_limits(conn, "q", actor="alice", key_field="tenant", fair_share=True)
    first = _claim(conn, 40)
    assert set(_tenants(first).values()) == {1}


def test_priorities_hold_within_a_tenant(conn: Conn) -> None:
    _submit(conn, "a", 50)
    _submit(conn, "a", 2, priority=9)  # the newest, yet a's first
    _submit(conn, "b", 50)
    queues.set_limits(conn, "q", actor="alice", key_field="tenant", fair_share=True)
    first = _claim(conn, 4)
    mine = [r for r in first if r.args["tenant"] == "a"]
    assert len(mine) == 2
    ids = {r.run_id for r in mine}
    top = conn.execute("SELECT id FROM job_runs WHERE priority = 9").fetchall()
    assert ids == {r["id"] for r in top}


def test_runs_without_the_key_share_one_place(conn: Conn) -> None:
    _submit(conn, None, 100)
    _submit(conn, "a", 100)
    queues.set_limits(conn, "q", actor="alice", key_field="tenant", fair_share=True)
    assert _tenants(_claim(conn, 10)) == {None: 5, "a": 5}


def test_fair_share_and_a_key_limit_hold_together(conn: Conn) -> None:
    _submit(conn, "a", 100)
    _submit(conn, "b", 100)
    queues.set_limits(conn, "q", actor="alice", key_field="tenant", fair_share=True,
                      key_max_running=2)  # fmt: skip
    assert _tenants(_claim(conn, 10)) == {"a": 2, "b": 2}
    assert _claim(conn, 10) == []


@pytest.mark.parametrize(
    ("settings", "field", "message"),
    [
        ({"fair_share": True}, "key_field", "needs both the input field"),
        ({"key_field": "t", "key_weights": {"a": 2}}, "key_weights", "weights apply to fair"),
        ({"key_field": "t", "fair_share": True, "key_weights": {"a": 0}}, "key_weights",
         "the weight of 'a' must be between 1 and 1,000"),
        ({"key_field": "t", "fair_share": True, "key_weights": {"a": 2.5}}, "key_weights",
         "must be a whole number"),
        ({"key_field": "t", "fair_share": "yes"}, "fair_share", "true or false"),
        ({"key_field": "t", "fair_share": True, "key_weights": {f"k{i}": 1 for i in range(1001)}},
         "key_weights", "at most 1,000 keys"),
    ],
)  # fmt: skip
def test_bad_fair_share_settings_are_refused_and_change_nothing(
    conn: Conn, settings: dict[str, Any], field: str, message: str
) -> None:
    queues.set_limits(conn, "q", actor="alice", max_running=7)
    with pytest.raises(QueueError, match=message) as refused:
        queues.set_limits(conn, "q", actor="alice", **settings)
    assert refused.value.field == field
    (q,) = [q for q in queues.overview(conn) if q.name == "q"]
    assert (q.max_running, q.fair_share, q.key_weights) == (7, False, {})


def test_the_cli_sets_fair_share_with_weights(db_url: str, conn: Conn) -> None:
    done = run_sundial(db_url, "queue", "limit", "q", "--key-field", "tenant", "--fair-share",
                       "--weight", "acme=3", "--weight", "a=b=2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "queue 'q': fair turns per tenant (weights: a=b 2, acme 3)"
    for args, message in [
        (["--weight", "acme"], "--weight takes KEY=N with N a whole number, got 'acme'"),
        (["--weight", "acme=x"], "--weight takes KEY=N"),
        (["--weight", "acme=0"], "the weight of 'acme' must be between 1 and 1,000"),
    ]:
        refused = run_sundial(db_url, "queue", "limit", "q", "--key-field", "tenant",
                              "--fair-share", *args)  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr
    (q,) = [q for q in queues.overview(conn) if q.name == "q"]
    assert q.key_weights == {"acme": 3, "a=b": 2}


def test_the_api_sets_fair_share_and_refuses_bad_weights(db_url: str) -> None:
    with api_as(db_url, "operator") as client:
        done = client.put("/api/v1/queues/q/limits", json={
            "key_field": "tenant", "fair_share": True, "key_weights": {"acme": 3}})  # fmt: skip
        assert done.status_code == 200, done.text
        assert (done.json()["fair_share"], done.json()["key_weights"]) == (True, {"acme": 3})
        for body in [
            {"key_field": "tenant", "fair_share": True, "key_weights": {"acme": 0}},
            {"key_field": "tenant", "fair_share": True, "key_weights": {"acme": "3"}},
            {"key_field": "tenant", "key_weights": {"acme": 3}},
        ]:
            refused = client.put("/api/v1/queues/q/limits", json=body)
            assert refused.status_code == 422, (body, refused.text)
            assert "key_weights" in refused.text
        again = client.get("/api/v1/queues").json()["queues"]
        assert [q["key_weights"] for q in again if q["name"] == "q"] == [{"acme": 3}]
