"""Fleet-wide concurrency limits against a real PostgreSQL: a queue's `max_running`, and a
per-key limit whose key is a field of the run's args. A run over a limit waits pending with
its attempt unspent, one key's backlog holds no other key up, and a place comes free when
a run ends or its lease expires."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from app.core.sql import query
from app.handlers.jobs import ClaimedRun, Outcome
from app.runs import limit_fit, queue_limits, queues, submission, transitions
from app.runs.queues import QueueError
from app.runs.run_inserts import NewRun

Conn = psycopg.Connection[Any]
LEASE = 30.0


def _submit(
    conn: Conn, count: int, *, queue: str = "q", priority: int = 0, **args: Any
) -> list[int]:
    return [
        submission.submit(conn, NewRun("noop", args=dict(args), queue=queue, priority=priority)).id
        for _ in range(count)
    ]


def _claim(
    conn: Conn, limit: int = 50, *, queue: str = "q", now: datetime | None = None
) -> list[ClaimedRun]:
    return transitions.claim(conn, "w", limit, LEASE, queue=queue, now=now)


def _complete(conn: Conn, runs: list[ClaimedRun]) -> None:
    finishes = [transitions.Finish(r.run_id, r.attempt, Outcome.completed()) for r in runs]
    assert len(transitions.finish_many(conn, "w", finishes)) == len(runs)


def _key_of(conn: Conn, run: ClaimedRun) -> Any:
    return run.args.get("customer")


def test_a_queue_limit_holds_across_claims_and_frees_a_place_per_run_ended(conn: Conn) -> None:
    _submit(conn, 10)
    queues.set_limits(conn, "q", actor="alice", max_running=3)
    first = _claim(conn, 2)
    assert len(first) == 2
    second = _claim(conn)
    assert len(second) == 1  # one place left of three
    assert _claim(conn) == []
    _complete(conn, first)
    assert len(_claim(conn)) == 2
    assert _claim(conn) == []
    assert _claim(conn, queue="other") == []  # nothing there; other queues are not limited
    _submit(conn, 4, queue="other")
    assert len(_claim(conn, queue="other")) == 4


def test_a_key_limit_starts_one_run_per_key_and_the_next_when_it_ends(conn: Conn) -> None:
    for customer in ("a", "b", "c"):
        _submit(conn, 5, customer=customer)
    _submit(conn, 2)  # no customer: no key, so no per-key limit
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=1)
    first = _claim(conn)
    assert sorted(str(_key_of(conn, r)) for r in first) == ["None", "None", "a", "b", "c"]
    assert _claim(conn) == []
    a = [r for r in first if _key_of(conn, r) == "a"]
    _complete(conn, a)
    (again,) = _claim(conn)
    assert _key_of(conn, again) == "a"


def test_runs_held_back_stay_pending_with_their_attempt_unspent(conn: Conn) -> None:
    ids = _submit(conn, 4, customer="a")
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=2)
    assert len(_claim(conn)) == 2
    rows = conn.execute(
        "SELECT status, count(*) AS n, max(attempt) AS attempt FROM job_runs"
        " WHERE id = ANY(%s) GROUP BY status ORDER BY status",
        (ids,),
    ).fetchall()
    assert [(r["status"], r["n"], r["attempt"]) for r in rows] == [
        ("pending", 2, 0),
        ("running", 2, 1),
    ]


def test_one_keys_backlog_does_not_hold_up_another_key(conn: Conn) -> None:
    # 300 runs of customer a wait longer than customer b's one: with a at its limit, b's run
    # starts at the next claim rather than after a's backlog.
    _submit(conn, 300, customer="a")
    (b,) = _submit(conn, 1, customer="b")
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=1)
    claimed = _claim(conn, 10) + _claim(conn, 10)
    assert [_key_of(conn, r) for r in claimed] == ["a", "b"]
    assert claimed[1].run_id == b


def test_priorities_hold_within_a_key(conn: Conn) -> None:
    _submit(conn, 3, customer="a", priority=1)
    (urgent,) = _submit(conn, 1, customer="a", priority=9)
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=1)
    (first,) = _claim(conn)
    assert first.run_id == urgent


def test_both_limits_hold_together(conn: Conn) -> None:
    for customer in "abcdef":
        _submit(conn, 3, customer=customer)
    queues.set_limits(
        conn, "q", actor="alice", max_running=4, key_field="customer", key_max_running=2
    )
    claimed = _claim(conn)
    assert len(claimed) == 4
    keys = [_key_of(conn, r) for r in claimed]
    assert all(keys.count(k) <= 2 for k in keys)


def test_an_expired_lease_frees_its_place_before_the_reaper_comes(conn: Conn) -> None:
    _submit(conn, 2, customer="a")
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=1)
    now = datetime.now(UTC) + timedelta(seconds=1)
    assert len(_claim(conn, now=now)) == 1
    assert _claim(conn, now=now + timedelta(seconds=LEASE - 1)) == []
    assert len(_claim(conn, now=now + timedelta(seconds=LEASE + 1))) == 1


def test_a_paused_limited_queue_starts_nothing(conn: Conn) -> None:
    _submit(conn, 2)
    queues.set_limits(conn, "q", actor="alice", max_running=5)
    queues.pause(conn, "q", actor="alice")
    assert _claim(conn) == []
    queues.resume(conn, "q", actor="alice")
    assert len(_claim(conn)) == 2


def test_limits_removed_let_the_plain_claim_take_the_queue_again(conn: Conn) -> None:
    _submit(conn, 3)
    queues.set_limits(conn, "q", actor="alice", max_running=1)
    assert queue_limits.limited(conn, "q")
    assert len(_claim(conn)) == 1
    queues.set_limits(conn, "q", actor="alice")
    assert not queue_limits.limited(conn, "q")
    assert len(_claim(conn)) == 2


def test_a_limit_set_elsewhere_holds_before_this_process_reads_it(conn: Conn) -> None:
    # This process last read the queue as open; the plain claim still refuses a limited one.
    _submit(conn, 3)
    assert not queue_limits.limited(conn, "q")
    conn.execute("INSERT INTO queues (name, max_running) VALUES ('q', 1)")
    assert _claim(conn) == []
    queue_limits.forget("q")
    assert len(_claim(conn)) == 1


def test_setting_limits_is_audited(conn: Conn) -> None:
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=2)
    row = conn.execute(
        "SELECT actor, details FROM audit_log WHERE action = 'queue.limits'"
    ).fetchone()
    assert row is not None
    assert (row["actor"], row["details"]["before"]["key_max_running"]) == ("alice", None)
    assert row["details"]["after"] == {
        "max_running": None,
        "key_field": "customer",
        "key_max_running": 2,
        "rate_limit": None,
        "rate_period_seconds": None,
        "rate_burst": None,
        "rate_per_key": False,
        "fair_share": False,
        "key_weights": {},
    }
    (q,) = [q for q in queues.overview(conn) if q.name == "q"]
    assert (q.key_field, q.key_max_running, q.limits_by) == ("customer", 2, "alice")


@pytest.mark.parametrize(
    ("settings", "field", "message"),
    [
        ({"max_running": 0}, "max_running", "the most running at once must be"),
        ({"max_running": 2.5}, "max_running", "whole number"),
        ({"key_field": "customer"}, "key_max_running", "a limit per key needs both"),
        ({"key_max_running": 3}, "key_field", "a limit per key needs both"),
        ({"key_field": "", "key_max_running": 1}, "key_field", "the key field cannot be empty"),
        ({"key_field": "a", "key_max_running": -1}, "key_max_running", "per key must be"),
        ({"rate_limit": 20}, "rate_period_seconds", "a rate needs its period in seconds"),
        ({"rate_period_seconds": 1}, "rate_period_seconds", "a rate needs how many starts"),
        ({"rate_burst": 3}, "rate_burst", "a rate needs how many starts"),
        ({"rate_limit": 0, "rate_period_seconds": 1}, "rate_limit", "the starts per period"),
        ({"rate_limit": 5, "rate_period_seconds": 0}, "rate_period_seconds", "between 1 and"),
        ({"rate_limit": 5, "rate_period_seconds": 1, "rate_burst": 0}, "rate_burst", "burst"),
    ],
)
def test_bad_limits_are_refused_with_a_sentence_and_change_nothing(
    conn: Conn, settings: dict[str, Any], field: str, message: str
) -> None:
    queues.set_limits(conn, "q", actor="alice", max_running=7)
    with pytest.raises(QueueError, match=message) as refused:
        queues.set_limits(conn, "q", actor="alice", **settings)
    assert refused.value.field == field
    (q,) = [q for q in queues.overview(conn) if q.name == "q"]
    assert (q.max_running, q.key_field, q.key_max_running) == (7, None, None)


def test_the_cli_sets_lists_and_removes_limits(db_url: str, conn: Conn) -> None:
    from tests.helpers.commands import run_sundial

    done = run_sundial(db_url, "queue", "limit", "partner", "--key-field", "customer",
                       "--per-key", "1", "--max-running", "5")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "queue 'partner': at most 5 running, 1 per customer"
    listed = run_sundial(db_url, "queue", "list")
    (line,) = [ln for ln in listed.stdout.splitlines() if ln.startswith("partner\t")]
    assert line.endswith("\topen\tat most 5 running, 1 per customer")

    for args, message in [
        ([], "give the limits (--max-running, --key-field with --per-key or --fair-share,"),
        (["--per-key", "2"], "a limit per key needs both"),
        (["--max-running", "0"], "the most running at once must be between 1 and 1,000,000"),
        (["--none", "--max-running", "3"], "give the limits"),
    ]:
        refused = run_sundial(db_url, "queue", "limit", "partner", *args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert refused.stderr.startswith("sundial queue: error:") and message in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    (q,) = [q for q in queues.overview(conn) if q.name == "partner"]
    assert (q.max_running, q.key_max_running) == (5, 1)  # nothing refused was written

    rated = run_sundial(db_url, "queue", "limit", "partner", "--rate", "20", "--per-seconds",
                        "1", "--burst", "4")  # fmt: skip
    assert rated.stdout.strip() == "queue 'partner': at most 20 starts per 1 s (bursts of 4)"
    no_period = run_sundial(db_url, "queue", "limit", "partner", "--rate", "20")
    assert no_period.returncode == 2 and "a rate needs its period" in no_period.stderr
    cleared = run_sundial(db_url, "queue", "limit", "partner", "--none")
    assert cleared.stdout.strip() == "queue 'partner': no limits"


def test_a_rate_limit_spaces_starts_evenly_fleet_wide(conn: Conn) -> None:
    _submit(conn, 50)
    start = datetime.now(UTC) + timedelta(seconds=1)
    queues.set_limits(conn, "q", actor="alice", rate_limit=5, rate_period_seconds=1, now=start)

    def claimed_at(seconds: float) -> int:
        return len(_claim(conn, now=start + timedelta(seconds=seconds)))

    assert claimed_at(0) == 1  # a burst of 1: the bucket holds one start
    assert claimed_at(0.1) == 0
    assert claimed_at(0.19) == 0
    assert claimed_at(0.21) == 1  # one start every 0.2 s
    assert claimed_at(0.3) == 0
    assert claimed_at(10) == 1  # a quiet spell saves no more than the burst
    assert claimed_at(10.5) == 1  # and no more than the burst after it either


def test_a_rate_burst_lets_that_many_start_at_once(conn: Conn) -> None:
    _submit(conn, 50)
    start = datetime.now(UTC) + timedelta(seconds=1)
    queues.set_limits(conn, "q", actor="alice", rate_limit=60, rate_period_seconds=60,
                      rate_burst=10, now=start)  # fmt: skip
    assert len(_claim(conn, now=start)) == 10
    assert len(_claim(conn, now=start + timedelta(seconds=2.5))) == 2
    (q,) = [q for q in queues.overview(conn) if q.name == "q"]
    assert queues.limits_sentence(q) == "at most 60 starts per 60 s (bursts of 10)"


def test_a_rate_limit_and_a_key_limit_hold_together(conn: Conn) -> None:
    _submit(conn, 5, customer="a")
    _submit(conn, 5, customer="b")
    start = datetime.now(UTC) + timedelta(seconds=1)
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=1,
                      rate_limit=1, rate_period_seconds=1, rate_burst=5, now=start)  # fmt: skip
    # five starts in the bucket, but one run per customer
    assert len(_claim(conn, now=start)) == 2
    # the bucket kept what was not spent
    assert len(_claim(conn, now=start + timedelta(seconds=LEASE + 1))) == 2


def test_a_rate_per_key_spaces_each_keys_starts_and_lets_other_keys_go(conn: Conn) -> None:
    _submit(conn, 5, customer="a")
    _submit(conn, 5, customer="b")
    _submit(conn, 2)  # no key: not rate-limited per key
    start = datetime.now(UTC) + timedelta(seconds=1)
    queues.set_limits(conn, "q", actor="alice", key_field="customer", rate_limit=2,
                      rate_period_seconds=1, rate_per_key=True, now=start)  # fmt: skip

    def keys_at(seconds: float) -> list[Any]:
        return sorted(
            str(r.args.get("customer"))
            for r in _claim(conn, now=start + timedelta(seconds=seconds))
        )

    assert keys_at(0) == ["None", "None", "a", "b"]  # one start each: a burst of 1
    assert keys_at(0.2) == []
    assert keys_at(0.55) == ["a", "b"]  # one start per key every 0.5 s
    assert keys_at(0.6) == []
    (q,) = [q for q in queues.overview(conn) if q.name == "q"]
    assert queues.limits_sentence(q) == "at most 2 starts per 1 s for each customer"
    # the reaper drops the buckets that have refilled
    assert queues.prune_key_rates(conn, now=start + timedelta(seconds=0.7)) == 0
    assert queues.prune_key_rates(conn, now=start + timedelta(seconds=5)) == 2


def test_a_rate_per_key_needs_a_rate_and_a_key(conn: Conn) -> None:
    for settings, field in [
        ({"rate_per_key": True, "key_field": "c"}, "rate_limit"),
        ({"rate_per_key": True, "rate_limit": 1, "rate_period_seconds": 1}, "key_field"),
        ({"key_field": "c", "rate_limit": 1, "rate_period_seconds": 1}, "key_max_running"),
    ]:
        with pytest.raises(QueueError) as refused:
            queues.set_limits(conn, "q", actor="alice", **settings)
        assert refused.value.field == field, settings


def test_keys_at_their_limit_are_passed_over_whatever_characters_they_hold(conn: Conn) -> None:
    odd = ['a"b', "back\\slash", "ü-ñ 空", "{1,2}", "", "NULL", "comma, and space"]
    for key in odd:
        _submit(conn, 2, customer=key)
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=1)
    first = _claim(conn)
    assert sorted(_key_of(conn, r) for r in first) == sorted(odd)  # one of each key
    assert _claim(conn) == []  # every key full: the same keys read back from the database
    _complete(conn, first)
    assert sorted(_key_of(conn, r) for r in _claim(conn)) == sorted(odd)


def test_the_claims_count_of_running_runs_walks_its_index_after_many_runs_ended(
    conn: Conn,
) -> None:
    # A bitmap scan of the running runs' index never marks the entries of ended runs dead,
    # so each claim of a draining queue read all of them again (8 ms a claim, not 1).
    queues.set_limits(conn, "q", actor="alice", key_field="customer", key_max_running=1)
    for _ in range(20):
        submission.submit_many(
            conn, [NewRun("noop", args={"customer": f"c{i}"}, queue="q") for i in range(500)]
        )
        _complete(conn, _claim(conn, 500))
    submission.submit_many(
        conn, [NewRun("noop", args={"customer": f"c{i}"}, queue="q") for i in range(500)]
    )
    _claim(conn, 500)
    params = {"queue": "q", "key_field": "customer", "key_max_running": 1, "max_running": None,
              "ids": None, "now": None, "limit": 500, "scan": 675, "busy": False, "worker": "w",
              "lease_seconds": LEASE}  # fmt: skip
    # the count in the claim of limits of concurrency alone, and in that of the others
    for name in ("run_claim_limited", "run_limited_running"):
        with conn.transaction():
            conn.execute(query("queues", "queue_claim_turn"), {"queue": "q"})
            plan = conn.execute("EXPLAIN " + query("runs", name), params).fetchall()
        text = "\n".join(row["QUERY PLAN"] for row in plan)
        assert "ix_job_runs_lease" in text and "Bitmap" not in text, (name, text)


def test_the_claim_chooses_as_limit_fit_does(conn: Conn) -> None:
    # A queue with limits of concurrency alone is counted, chosen and claimed in one
    # statement; `limit_fit.fit` chooses for the queues with a rate per key or fair share.
    # Both must choose the same runs: keys full or not, runs without a key, priorities,
    # suspects, the queue's limit, a busy worker.
    chance = random.Random(25)
    for case in range(40):
        queue = f"fit{case}"
        keys = ["a", "b", "c", "d"][: chance.randint(1, 4)]
        runs = [
            NewRun("noop", queue=queue, priority=chance.choice([0, 0, 1, 5]),
                   args={"customer": chance.choice(keys)} if chance.random() < 0.8 else {})
            for _ in range(chance.randint(1, 25))
        ]  # fmt: skip
        ids = [r.id for r in submission.submit_many(conn, runs)]
        running = chance.sample(ids, chance.randint(0, min(6, len(ids))))
        suspects = chance.sample(ids, chance.choice([0, 0, 1, 2]))
        conn.execute(
            "UPDATE job_runs SET status = 'running', lease_owner = 'other', "
            "lease_until = now() + interval '1 minute', attempt = 1 WHERE id = ANY(%s)",
            [running],
        )
        conn.execute("UPDATE job_runs SET crash_count = 1 WHERE id = ANY(%s)", [suspects])
        per_key = chance.choice([None, 1, 1, 2, 3])
        max_running = chance.choice([None, None, 3, 6, 10]) if per_key else 8
        key_field = "customer" if per_key else None
        queues.set_limits(conn, queue, actor="alice", max_running=max_running,
                          key_field=key_field, key_max_running=per_key)  # fmt: skip
        size, busy = chance.randint(1, 12), chance.random() < 0.3
        expected = limit_fit.fit(
            _due_in_claim_order(conn, queue, per_key is not None),
            _running_by_key(conn, queue, per_key is not None),
            limit=size, max_running=max_running, key_max_running=per_key, busy=busy,
        )  # fmt: skip
        claimed = transitions.claim(conn, "w", size, LEASE, busy=busy, queue=queue)
        chosen = sorted(r.run_id for r in claimed)
        assert chosen == sorted(expected), (case, max_running, per_key, size, busy)


def _due_in_claim_order(conn: Conn, queue: str, keyed: bool) -> list[limit_fit.Due]:
    rows = conn.execute(
        "SELECT id, args ->> 'customer' AS key, crash_count > 0 AS suspect FROM job_runs "
        "WHERE status = 'pending' AND queue = %s ORDER BY priority DESC, run_at, id",
        [queue],
    ).fetchall()
    return [limit_fit.Due(r["id"], r["key"] if keyed else None, r["suspect"]) for r in rows]


def _running_by_key(conn: Conn, queue: str, keyed: bool) -> dict[str | None, int]:
    rows = conn.execute(
        "SELECT args ->> 'customer' AS key, count(*)::int AS n FROM job_runs "
        "WHERE status = 'running' AND queue = %s GROUP BY 1",
        [queue],
    ).fetchall()
    counts: dict[str | None, int] = {}
    for r in rows:
        key = r["key"] if keyed else None
        counts[key] = counts.get(key, 0) + r["n"]
    return counts
