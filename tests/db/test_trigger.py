"""The trigger against a real database, one `run_once(now=...)` at a time: leadership,
exactly-once fires, DST, catch-up, overlap, pause, spread and the clock going back."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from app.handlers.jobs import Outcome, OutcomeStatus
from app.runs import run_inserts, submission, transitions
from app.scheduling import schedules
from app.scheduling.cron import DstRepeated
from app.scheduling.due_cursor import DueCursor
from app.scheduling.fire_batches import Batch
from app.scheduling.fire_decisions import OverlapPolicy, spread_offset
from app.services.trigger import Trigger
from tests.helpers.schedules import T0, add, define_etl, ledger, run_fire_times, settings
from tests.helpers.waits import utc, wait_until_blocked

Conn = psycopg.Connection[dict[str, Any]]
MINUTE = timedelta(minutes=1)


def tick(trigger: Trigger, conn: Conn, start: datetime, end: datetime, step: timedelta) -> None:
    now = start
    while now <= end:
        trigger.run_once(conn, now=now)
        now += step


def outcomes(conn: Conn, schedule_id: Any) -> list[str]:
    return [r["outcome"] for r in ledger(conn, schedule_id)]


# ---- leadership ---------------------------------------------------------------------------


def test_one_leader_at_a_time_and_a_silent_one_is_replaced_after_its_lease(conn: Conn) -> None:
    lease = {"trigger_lease_seconds": 10.0}
    a = Trigger(settings(**lease), holder="a")
    b = Trigger(settings(**lease), holder="b")
    assert a.run_once(conn, now=T0).leader
    assert not b.run_once(conn, now=T0 + timedelta(seconds=5)).leader
    assert a.run_once(conn, now=T0 + timedelta(seconds=6)).leader  # renewed to T0+16s
    assert not b.run_once(conn, now=T0 + timedelta(seconds=15)).leader
    # a falls silent; its lease runs out at T0+16s and b takes over at term 2
    assert b.run_once(conn, now=T0 + timedelta(seconds=17)).leader
    assert lease_row(conn) == {"holder": "b", "term": 2}
    # a wakes up: its renewal matches nothing, so it steps down instead of acting
    assert not a.run_once(conn, now=T0 + timedelta(seconds=18)).leader
    assert a.lease.term is None


def test_a_resigning_leader_is_replaced_at_once(conn: Conn) -> None:
    a, b = Trigger(settings(), holder="a"), Trigger(settings(), holder="b")
    assert a.run_once(conn, now=T0).leader
    a.lease.resign(conn, now=T0 + timedelta(seconds=1))
    assert b.run_once(conn, now=T0 + timedelta(seconds=1)).leader
    assert lease_row(conn) == {"holder": "b", "term": 2}


def lease_row(conn: Conn) -> dict[str, Any] | None:
    return conn.execute("SELECT holder, term FROM leader_leases WHERE name = 'trigger'").fetchone()


# ---- exactly once -------------------------------------------------------------------------


def test_every_fire_is_enqueued_exactly_once_over_many_ticks(conn: Conn) -> None:
    sid = add(conn, "every-10", cron="*/10 * * * *")
    trigger = Trigger(settings())
    tick(trigger, conn, T0, T0 + timedelta(hours=2), timedelta(seconds=170))
    expected = [utc("2026-05-01T10:00") + timedelta(minutes=10 * k) for k in range(12)]
    assert run_fire_times(conn, sid) == expected
    assert outcomes(conn, sid) == ["enqueued"] * 12
    assert all(r["run_id"] is not None for r in ledger(conn, sid))


def tick_as_two_leaders(db_url: str, instants: list[datetime], config: Any) -> None:
    """Split brain: two triggers that both believe they lead tick at the same instants, each
    on its own connection."""
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def lead(holder: str) -> None:
        trigger = Trigger(config, holder=holder)
        trigger.lease.hold = lambda conn, now=None: True  # type: ignore[method-assign]
        trigger.lease.still_held = lambda conn, now=None: True  # type: ignore[method-assign]
        try:
            with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
                for now in instants:
                    barrier.wait(timeout=30)
                    trigger.run_once(conn, now=now)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=lead, args=(h,)) for h in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []


def test_two_leaders_at_once_still_fire_each_once(db_url: str) -> None:
    """Split brain: both triggers believe they lead and tick at the same instants on their
    own connections. Row locks and the unique keys still give one run per fire."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as setup:
        ids = [add(setup, f"s{i}", cron="* * * * *") for i in range(60)]
    instants = [T0 + timedelta(seconds=30 + 20 * k) for k in range(30)]  # ten minutes
    tick_as_two_leaders(db_url, instants, settings(trigger_batch_size=7))
    expected = [utc("2026-05-01T10:00") + timedelta(minutes=k) for k in range(10)]
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        for sid in ids:
            assert run_fire_times(conn, sid) == expected
            rows = ledger(conn, sid)
            assert [r["fire_time"] for r in rows] == expected
            assert {r["outcome"] for r in rows} == {"enqueued"}


class RecordingTrigger(Trigger):
    """Notes which thread fired each batch, and can act after a given batch."""

    def __init__(self, *args: Any, after_batch: Any = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.threads: list[str] = []
        self.after_batch = after_batch

    def fire_batch(self, conn: Conn, cursor: DueCursor) -> Batch:
        fired = super().fire_batch(conn, cursor)
        if fired.schedules:
            self.threads.append(threading.current_thread().name)
            if self.after_batch:
                self.after_batch(len(self.threads))
        return fired


def test_a_big_tick_fires_each_schedule_once_across_helper_connections(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        ids = [add(conn, f"s{i}", cron="* * * * *") for i in range(150)]
        config = settings(trigger_batch_size=4, trigger_connections=3)
        trigger = RecordingTrigger(config, url=db_url)
        for minute in range(3):
            report = trigger.run_once(conn, now=utc("2026-05-01T10:00:05") + minute * MINUTE)
            assert (report.schedules, report.runs, report.fires) == (150, 150, 150)
        expected = [utc("2026-05-01T10:00") + k * MINUTE for k in range(3)]
        for sid in ids:
            assert run_fire_times(conn, sid) == expected
            assert [r["fire_time"] for r in ledger(conn, sid)] == expected
    assert any(name.startswith("trigger-helper") for name in trigger.threads)
    assert any(not name.startswith("trigger-helper") for name in trigger.threads)


def test_a_tick_that_loses_the_lease_stops_its_helpers_too(db_url: str) -> None:
    stolen_after: list[int] = []

    def steal_lease(batches: int) -> None:
        if batches == 2:
            with psycopg.connect(db_url, autocommit=True) as thief:
                thief.execute("UPDATE leader_leases SET holder = 'thief', term = term + 1")
            stolen_after.append(len(trigger.threads))

    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        for i in range(200):
            add(conn, f"s{i}", cron="0 * * * *")
        config = settings(trigger_batch_size=2, trigger_connections=2)
        trigger = RecordingTrigger(config, url=db_url, after_batch=steal_lease)
        trigger.run_once(conn, now=utc("2026-05-01T10:00:05"))
        fired = conn.execute("SELECT count(*) AS n FROM schedule_fires").fetchone()
        runs_made = conn.execute("SELECT count(*) AS n FROM job_runs").fetchone()
        moved = conn.execute(
            "SELECT count(*) AS n FROM schedules WHERE next_fire_time > %s",
            (utc("2026-05-01T10:00"),),
        ).fetchone()
    assert trigger.lease.term is None
    assert fired == runs_made == moved == {"n": 2 * len(trigger.threads)}
    # Once the lease is gone, each connection at most finishes the batch it had under way.
    assert len(trigger.threads) <= stolen_after[0] + 2 < 100


def test_an_error_in_a_helper_connection_fails_the_tick(db_url: str) -> None:
    def fail_in_helper(_batches: int) -> None:
        if threading.current_thread().name.startswith("trigger-helper"):
            raise RuntimeError("helper broke")

    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        for i in range(40):
            add(conn, f"s{i}", cron="0 * * * *")
        config = settings(trigger_batch_size=2, trigger_connections=2)
        trigger = RecordingTrigger(config, url=db_url, after_batch=fail_in_helper)
        with pytest.raises(RuntimeError, match="helper broke"):
            trigger.run_once(conn, now=utc("2026-05-01T10:00:05"))
        # The main connection went on alone: every schedule still fired once.
        rows = conn.execute("SELECT count(*) AS n FROM job_runs").fetchone()
    assert rows == {"n": 40}


def test_a_clock_that_jumps_back_fires_nothing_again(conn: Conn) -> None:
    sid = add(conn, "hourly", cron="0 * * * *")
    trigger = Trigger(settings())
    trigger.run_once(conn, now=utc("2026-05-01T12:00:05"))
    before = conn.execute("SELECT next_fire_time FROM schedules").fetchone()
    for now in ("2026-05-01T10:00:05", "2026-05-01T11:00:05", "2026-05-01T12:00:05"):
        trigger.run_once(conn, now=utc(now))
    assert run_fire_times(conn, sid) == [utc("2026-05-01T12:00")]
    assert conn.execute("SELECT next_fire_time FROM schedules").fetchone() == before


def test_an_ended_schedule_stops_and_is_no_longer_due(conn: Conn) -> None:
    sid = add(conn, "short", cron="0 * * * *", end_at=utc("2026-05-01T11:00"))
    tick(Trigger(settings()), conn, T0, T0 + timedelta(hours=4), timedelta(minutes=20))
    assert run_fire_times(conn, sid) == [utc("2026-05-01T10:00"), utc("2026-05-01T11:00")]
    assert conn.execute("SELECT next_fire_time FROM schedules").fetchone() == {
        "next_fire_time": None
    }


def test_interval_schedule_fires_every_interval_from_its_start(conn: Conn) -> None:
    sid = add(conn, "every-45s", every_seconds=45, start_at=utc("2026-05-01T10:00"))
    tick(Trigger(settings()), conn, T0, T0 + timedelta(minutes=5), timedelta(seconds=10))
    expected = [utc("2026-05-01T10:00") + timedelta(seconds=45 * k) for k in range(7)]
    assert run_fire_times(conn, sid) == expected


def test_a_schedule_whose_rule_cannot_be_computed_is_stopped_not_wedging_others(
    conn: Conn, caplog: pytest.LogCaptureFixture
) -> None:
    healthy = add(conn, "healthy", cron="0 * * * *")
    names = ["broken", "NULL", 'odd, {"quoted"} \\ name']  # odd as array elements
    broken = [add(conn, name, cron="0 * * * *") for name in names]  # one group
    conn.execute("UPDATE schedules SET timezone = 'Gone/Away' WHERE id = ANY(%s)", (broken,))
    report = Trigger(settings()).run_once(conn, now=utc("2026-05-01T10:00:05"))
    assert (report.schedules, report.runs) == (4, 1)
    assert run_fire_times(conn, healthy) == [utc("2026-05-01T10:00")]
    for sid in broken:
        row = conn.execute(
            "SELECT active, next_fire_time, paused_note FROM schedules WHERE id = %s", (sid,)
        ).fetchone()
        assert row == {
            "active": False,
            "next_fire_time": None,
            "paused_note": "stopped by the trigger: unknown time zone 'Gone/Away'; use an IANA "
            "name like Europe/Berlin or UTC",
        }
    stopped = [r.args[0] for r in caplog.records if "stopped by the trigger" in r.getMessage()]
    assert sorted(stopped) == sorted(names)


# ---- workflow schedules -------------------------------------------------------------------


def test_a_workflow_schedule_fires_one_dag_run_per_fire(conn: Conn) -> None:
    define_etl(conn)
    sid = add(conn, "etl-half-hourly", cron="*/30 * * * *", handler=None, workflow="etl")
    tick(Trigger(settings()), conn, T0, T0 + timedelta(hours=1), timedelta(minutes=7))
    dag_runs = conn.execute(
        "SELECT id, fire_time FROM dag_runs WHERE schedule_id = %s ORDER BY fire_time", (sid,)
    ).fetchall()
    assert [d["fire_time"] for d in dag_runs] == [utc("2026-05-01T10:00"), utc("2026-05-01T10:30")]
    rows = ledger(conn, sid)
    assert [(r["outcome"], r["dag_run_id"], r["run_id"]) for r in rows] == [
        ("enqueued", d["id"], None) for d in dag_runs
    ]
    steps = conn.execute(
        "SELECT handler, status, args, fire_time FROM job_runs WHERE dag_run_id = %s "
        "ORDER BY status",
        (dag_runs[0]["id"],),
    ).fetchall()
    assert [(s["status"], s["args"]) for s in steps] == [("blocked", {"x": 1}), ("pending", {})]
    assert {s["fire_time"] for s in steps} == {utc("2026-05-01T10:00")}


def test_schedules_of_one_workflow_and_rule_each_start_their_own_dag_run(conn: Conn) -> None:
    define_etl(conn)
    ids = [add(conn, f"etl-{i}", cron="0 * * * *", handler=None, workflow="etl") for i in range(4)]
    report = Trigger(settings()).run_once(conn, now=utc("2026-05-01T10:00:05"))
    assert (report.schedules, report.fires, report.runs) == (4, 4, 4)
    for sid in ids:
        [row] = ledger(conn, sid)
        dag_run = conn.execute("SELECT id FROM dag_runs WHERE schedule_id = %s", (sid,))
        assert (row["outcome"], row["dag_run_id"]) == ("enqueued", dag_run.fetchone()["id"])


def test_a_workflow_fire_is_skipped_while_its_previous_dag_run_is_active(conn: Conn) -> None:
    define_etl(conn)
    sid = add(
        conn, "etl", cron="*/30 * * * *", handler=None, workflow="etl", overlap=OverlapPolicy.SKIP
    )
    tick(Trigger(settings()), conn, T0, T0 + timedelta(hours=1), timedelta(minutes=7))
    assert outcomes(conn, sid) == ["enqueued", "skipped_overlap"]
    started = schedules.run_now(conn, "etl", now=utc("2026-05-01T10:40"))
    assert started.run_id is None and started.dag_run_id is not None
    assert ledger(conn, sid)[-1]["dag_run_id"] == started.dag_run_id


# ---- DST end to end -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "start", "repeated", "expected"),
    [
        ("30 2 * * *", "2026-03-07T12:00", "first", ["2026-03-08T07:00", "2026-03-09T06:30"]),
        ("0 1 * * *", "2026-10-31T12:00", "first", ["2026-11-01T05:00", "2026-11-02T06:00"]),
        (
            "0 1 * * *",
            "2026-10-31T12:00",
            "both",
            ["2026-11-01T05:00", "2026-11-01T06:00", "2026-11-02T06:00"],
        ),
    ],
)
def test_new_york_dst_nights_fire_once_per_intended_time(
    conn: Conn, cron: str, start: str, repeated: str, expected: list[str]
) -> None:
    begin = utc(start)
    sid = add(
        conn,
        "ny",
        now=begin,
        cron=cron,
        timezone="America/New_York",
        dst_repeated=DstRepeated(repeated),
    )
    tick(Trigger(settings()), conn, begin, begin + timedelta(hours=44), timedelta(minutes=7))
    assert run_fire_times(conn, sid) == [utc(e) for e in expected]
    minute, hour = cron.split()[:2]
    intended = {f"{r['local_time']:%H:%M}" for r in ledger(conn, sid)}
    assert intended == {f"{int(hour):02}:{int(minute):02}"}  # the ledger keeps the local time


# ---- catch-up after downtime --------------------------------------------------------------


def test_downtime_coalesces_into_the_latest_fire_by_default(conn: Conn) -> None:
    sid = add(conn, "hourly", cron="0 * * * *")
    Trigger(settings()).run_once(conn, now=utc("2026-05-01T14:20"))
    run_times = run_fire_times(conn, sid)
    assert run_times == [utc("2026-05-01T14:00")]
    rows = ledger(conn, sid)
    assert [r["outcome"] for r in rows] == ["coalesced"] * 4 + ["enqueued"]
    assert rows[-1]["coalesced_count"] == 4
    assert {r["run_id"] for r in rows} == {rows[-1]["run_id"]}


def test_downtime_with_catchup_all_backfills_each_fire_with_its_own_fire_time(
    conn: Conn,
) -> None:
    sid = add(conn, "hourly", cron="0 * * * *", catchup=True)
    Trigger(settings()).run_once(conn, now=utc("2026-05-01T14:20"))
    assert run_fire_times(conn, sid) == [
        utc("2026-05-01T10:00") + timedelta(hours=k) for k in range(5)
    ]
    assert outcomes(conn, sid) == ["enqueued"] * 5
    # Each ledger row links the run of its own fire, and the schedule moved on once.
    linked = conn.execute(
        "SELECT f.fire_time = r.fire_time AS own FROM schedule_fires f "
        "JOIN job_runs r ON r.id = f.run_id WHERE f.schedule_id = %s",
        (sid,),
    ).fetchall()
    assert [r["own"] for r in linked] == [True] * 5
    moved = conn.execute("SELECT next_fire_time FROM schedules WHERE id = %s", (sid,)).fetchone()
    assert moved == {"next_fire_time": utc("2026-05-01T15:00")}


def test_a_long_outage_on_every_minute_is_bounded(conn: Conn) -> None:
    sid = add(conn, "minutely", cron="* * * * *", catchup=True)
    trigger = Trigger(settings(trigger_catchup_max=50))
    started = time.monotonic()
    trigger.run_once(conn, now=utc("2026-06-01T10:00:30"))  # a month: 44,640 missed fires
    assert time.monotonic() - started < 30
    assert len(run_fire_times(conn, sid)) == 50
    counts = conn.execute(
        "SELECT outcome, count(*) AS n FROM schedule_fires GROUP BY outcome ORDER BY outcome"
    ).fetchall()
    assert counts == [{"outcome": "enqueued", "n": 50}, {"outcome": "missed", "n": 100}]
    # The next tick carries on normally.
    trigger.run_once(conn, now=utc("2026-06-01T10:01:10"))
    assert run_fire_times(conn, sid)[-1] == utc("2026-06-01T10:01")


# ---- overlap ------------------------------------------------------------------------------


def test_overlap_skip_records_a_fire_while_the_previous_run_is_pending(conn: Conn) -> None:
    sid = add(conn, "skip", cron="* * * * *", overlap=OverlapPolicy.SKIP)
    tick(Trigger(settings()), conn, T0, T0 + timedelta(minutes=3), timedelta(minutes=1))
    assert outcomes(conn, sid) == ["enqueued", "skipped_overlap", "skipped_overlap"]
    assert len(run_fire_times(conn, sid)) == 1


def test_overlap_queue_enqueues_the_waiting_fire_when_the_run_ends(conn: Conn) -> None:
    sid = add(conn, "queue", cron="* * * * *", overlap=OverlapPolicy.QUEUE)
    trigger = Trigger(settings())
    tick(trigger, conn, T0 + timedelta(seconds=40), T0 + timedelta(minutes=3), timedelta(minutes=1))
    assert outcomes(conn, sid) == ["enqueued", "queued", "skipped_overlap"]
    first_run = ledger(conn, sid)[0]["run_id"]
    assert transitions.cancel(conn, first_run) == "cancelled"
    report = trigger.run_once(conn, now=T0 + timedelta(minutes=3, seconds=20))
    assert report.released == 1
    queued = ledger(conn, sid)[1]
    assert queued["outcome"] == "enqueued" and queued["run_id"] is not None
    assert run_fire_times(conn, sid) == [utc("2026-05-01T10:00"), utc("2026-05-01T10:01")]


def test_a_queued_fire_waits_while_run_now_is_starting_a_run_of_its_schedule(
    db_url: str,
) -> None:
    """ "Run now" locks the schedule and writes its run; until it commits, the release of a
    queued fire must neither see the schedule as idle nor wait for it: it skips it, and
    once the run is committed the fire stays queued behind it."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        sid = add(conn, "queue", cron="* * * * *", overlap=OverlapPolicy.QUEUE)
        trigger = Trigger(settings())
        tick(
            trigger, conn, T0 + timedelta(seconds=40), T0 + timedelta(minutes=1, seconds=40), MINUTE
        )
        assert outcomes(conn, sid) == ["enqueued", "queued"]
        assert transitions.cancel(conn, ledger(conn, sid)[0]["run_id"]) == "cancelled"
        with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as person:
            with person.transaction():
                schedules.run_now(person, "queue", now=T0 + timedelta(minutes=2))
                report = trigger.run_once(conn, now=T0 + timedelta(minutes=2, seconds=1))
                assert report.released == 0
        report = trigger.run_once(conn, now=T0 + timedelta(minutes=2, seconds=2))
        assert report.released == 0
        assert [r["outcome"] for r in ledger(conn, sid) if not r["manual"]] == [
            "enqueued", "queued",
        ]  # fmt: skip
        active = conn.execute(
            "SELECT count(*) AS n FROM job_runs WHERE schedule_id = %s "
            "AND status IN ('pending', 'running')",
            (sid,),
        ).fetchone()
        assert active is not None and active["n"] == 1


def test_overlap_cancel_cancels_the_previous_run(conn: Conn) -> None:
    sid = add(conn, "cancel", cron="* * * * *", overlap=OverlapPolicy.CANCEL)
    tick(Trigger(settings()), conn, T0, T0 + timedelta(minutes=2), timedelta(minutes=1))
    statuses = conn.execute(
        "SELECT status FROM job_runs WHERE schedule_id = %s ORDER BY fire_time", (sid,)
    ).fetchall()
    assert [s["status"] for s in statuses] == ["cancelled", "pending"]
    assert "cancelled the previous run" in (ledger(conn, sid)[1]["detail"] or "")


# ---- schedules that fire alike --------------------------------------------------------------


def job_of(conn: Conn, schedule_id: Any) -> Any:
    row = conn.execute("SELECT job_id FROM schedules WHERE id = %s", (schedule_id,)).fetchone()
    assert row is not None
    return row["job_id"]


def test_schedules_that_share_a_rule_fire_as_one_group_each_with_its_own_job_and_spread(
    conn: Conn,
) -> None:
    ids = [
        add(conn, f"hourly-{i}", cron="0 * * * *", handler=f"job.h{i}", exact_minute=False,
            spread_seconds=600, overlap=OverlapPolicy.SKIP)
        for i in range(30)
    ]  # fmt: skip
    other_zone = add(conn, "berlin", cron="0 * * * *", timezone="Europe/Berlin")
    now = utc("2026-05-01T10:00:05")
    with conn.transaction(force_rollback=True):
        groups = DueCursor(now, 100).lock_next(conn)
    assert sorted(len(g["ids"] or [g["id"]]) for g in groups) == [1, 30]

    report = Trigger(settings()).run_once(conn, now=now)
    assert (report.schedules, report.fires, report.runs) == (31, 31, 31)
    fired = conn.execute(
        "SELECT r.id, r.schedule_id, r.job_id, r.handler, r.fire_time, r.run_at, f.run_id, "
        "f.outcome, s.next_fire_time FROM job_runs r "
        "JOIN schedule_fires f ON f.schedule_id = r.schedule_id AND f.fire_time = r.fire_time "
        "JOIN schedules s ON s.id = r.schedule_id"
    ).fetchall()
    by_schedule = {r["schedule_id"]: r for r in fired}
    assert set(by_schedule) == {*ids, other_zone}
    for i, sid in enumerate(ids):
        run = by_schedule[sid]
        assert run["job_id"] == job_of(conn, sid) and run["handler"] == f"job.h{i}"
        assert run["fire_time"] == utc("2026-05-01T10:00")
        assert run["run_at"] - run["fire_time"] == spread_offset(sid, timedelta(seconds=600))
        assert (run["outcome"], run["run_id"]) == ("enqueued", run["id"])
        assert run["next_fire_time"] == utc("2026-05-01T11:00")
    assert len({by_schedule[sid]["run_at"] for sid in ids}) > 1  # spread, not one instant


def test_a_schedule_with_an_active_run_leaves_its_group_and_skips_alone(conn: Conn) -> None:
    ids = [add(conn, f"hourly-{i}", cron="0 * * * *", overlap=OverlapPolicy.SKIP) for i in range(8)]
    busy = ids[3]
    schedules.run_now(conn, "hourly-3", now=utc("2026-05-01T09:30"))
    report = Trigger(settings()).run_once(conn, now=utc("2026-05-01T10:00:05"))
    assert (report.schedules, report.fires, report.runs) == (8, 8, 7)
    for sid in ids:
        expected = ["skipped_overlap"] if sid == busy else ["enqueued"]
        assert [r["outcome"] for r in ledger(conn, sid) if not r["manual"]] == expected


def test_a_run_committed_as_the_schedule_is_locked_is_seen_by_the_overlap_policy(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The locking statement reads the schedule's runs in the snapshot it started with; a
    run committed after that (by "run now", just before the lock was taken) must still stop
    a `skip` schedule from firing on top of it. Here the run commits right after the lock."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        sid = add(conn, "skip", cron="0 * * * *", overlap=OverlapPolicy.SKIP)
        job_id = job_of(conn, sid)

        class RunCommittedAtTheLock(DueCursor):
            def lock_next(self, conn: Conn) -> list[dict[str, Any]]:
                groups = super().lock_next(conn)
                with psycopg.connect(db_url, autocommit=True) as other:
                    at = utc("2026-05-01T09:59:59")
                    submission.submit_fires(other, [run_inserts.FireRequest(sid, job_id, at, at)])
                return groups

        monkeypatch.setattr("app.services.trigger.DueCursor", RunCommittedAtTheLock)
        Trigger(settings()).run_once(conn, now=utc("2026-05-01T10:00:05"))
        assert outcomes(conn, sid) == ["skipped_overlap"]
        assert run_fire_times(conn, sid) == [utc("2026-05-01T09:59:59")]


# ---- spread -------------------------------------------------------------------------------


def test_run_at_is_spread_by_a_stable_offset_unless_exact_minute(conn: Conn) -> None:
    spread = add(conn, "spread", cron="0 * * * *", exact_minute=False, spread_seconds=600)
    exact = add(conn, "exact", cron="0 * * * *")
    Trigger(settings()).run_once(conn, now=utc("2026-05-01T10:00:01"))
    rows = conn.execute("SELECT schedule_id, fire_time, run_at FROM job_runs").fetchall()
    offsets = {r["schedule_id"]: r["run_at"] - r["fire_time"] for r in rows}
    assert offsets[spread] == spread_offset(spread, timedelta(seconds=600))
    assert timedelta(0) <= offsets[spread] < timedelta(seconds=600)
    assert offsets[exact] == timedelta(0)


# ---- pause, auto-pause, run now -----------------------------------------------------------


def test_fires_while_paused_are_recorded_and_resume_fires_again(conn: Conn) -> None:
    sid = add(conn, "paused", cron="*/30 * * * *")
    schedules.pause(conn, "paused", note="maintenance", now=T0)
    trigger = Trigger(settings())
    tick(trigger, conn, T0, T0 + timedelta(hours=1), timedelta(minutes=10))
    assert outcomes(conn, sid) == ["paused", "paused"]
    assert ledger(conn, sid)[0]["detail"] == "schedule paused: maintenance"
    assert run_fire_times(conn, sid) == []
    assert schedules.resume(conn, "paused", now=T0 + timedelta(hours=1))
    trigger.run_once(conn, now=utc("2026-05-01T11:00:02"))
    assert outcomes(conn, sid) == ["paused", "paused", "enqueued"]


def test_a_pause_with_an_expiry_resumes_by_itself(conn: Conn) -> None:
    sid = add(conn, "until", cron="*/30 * * * *")
    schedules.pause(conn, "until", until=utc("2026-05-01T10:45"), now=T0)
    trigger = Trigger(settings())
    tick(trigger, conn, T0, T0 + timedelta(hours=1, minutes=5), timedelta(minutes=5))
    assert outcomes(conn, sid) == ["paused", "paused", "enqueued"]
    row = conn.execute("SELECT active, paused_until, resumed_at FROM schedules").fetchone()
    assert row == {"active": True, "paused_until": None, "resumed_at": utc("2026-05-01T10:45")}


def test_auto_pause_after_consecutive_failures_records_why(conn: Conn) -> None:
    sid = add(conn, "flaky", cron="* * * * *", auto_pause_after=2)
    trigger = Trigger(settings())
    for minute in range(2):
        now = utc("2026-05-01T10:00:10") + timedelta(minutes=minute)
        trigger.run_once(conn, now=now)
        fail_pending_runs(conn, now)
    report = trigger.run_once(conn, now=utc("2026-05-01T10:01:50"))
    assert report.auto_paused == 1
    row = conn.execute("SELECT active, paused_note FROM schedules").fetchone()
    assert row is not None and not row["active"]
    assert row["paused_note"].startswith("auto-paused after 2 consecutive failed runs (last: run")
    assert "boom" in row["paused_note"]
    trigger.run_once(conn, now=utc("2026-05-01T10:02:10"))
    assert outcomes(conn, sid)[-1] == "paused"
    # Resuming starts a new streak: the old failures do not pause it again.
    schedules.resume(conn, "flaky", now=utc("2026-05-01T10:02:20"))
    report = trigger.run_once(conn, now=utc("2026-05-01T10:03:10"))
    assert report.auto_paused == 0
    assert outcomes(conn, sid)[-1] == "enqueued"


def test_a_schedule_resumed_while_the_trigger_pauses_it_for_its_failures_stays_resumed(
    db_url: str, conn: Conn
) -> None:
    """The trigger reads a schedule's failure streak, then pauses it. Meanwhile a person
    pauses and resumes it (a new streak starts at the resume); the trigger's pause waits
    for the schedule's row and must then leave the resumed schedule alone, not pause it
    for the streak the resume ended."""
    add(conn, "flaky", cron="* * * * *", auto_pause_after=2)
    trigger = Trigger(settings())
    for minute in range(2):
        now = utc("2026-05-01T10:00:10") + timedelta(minutes=minute)
        trigger.run_once(conn, now=now)
        fail_pending_runs(conn, now)
    paused: list[int] = []
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as other:
        pausing = threading.Thread(target=lambda: paused.append(trigger.auto_pause(other)))
        with conn.transaction():  # the person's pause and resume commit during that wait
            schedules.pause(conn, "flaky", now=utc("2026-05-01T10:01:40"))
            schedules.resume(conn, "flaky", now=utc("2026-05-01T10:01:45"))
            pausing.start()
            wait_until_blocked(conn, other.info.backend_pid, or_done=pausing)
        pausing.join(timeout=10)
    assert paused == [0]
    row = conn.execute("SELECT active, paused_note FROM schedules").fetchone()
    assert row == {"active": True, "paused_note": None}


def test_a_workflow_schedule_auto_pauses_after_consecutive_failed_dag_runs(conn: Conn) -> None:
    define_etl(conn)
    sid = add(conn, "etl", cron="* * * * *", handler=None, workflow="etl", auto_pause_after=2)
    trigger = Trigger(settings())
    trigger.run_once(conn, now=utc("2026-05-01T10:00:10"))
    fail_pending_runs(conn, utc("2026-05-01T10:00:20"))  # extract fails, load is skipped
    trigger.run_once(conn, now=utc("2026-05-01T10:01:10"))
    complete_pending_runs(conn)  # extract done, which releases load
    complete_pending_runs(conn)  # load done: a good DAG run breaks the streak
    for minute in (2, 3):
        report = trigger.run_once(conn, now=utc("2026-05-01T10:00:10") + minute * MINUTE)
        assert report.auto_paused == 0
        fail_pending_runs(conn, utc("2026-05-01T10:00:20") + minute * MINUTE)
    report = trigger.run_once(conn, now=utc("2026-05-01T10:03:50"))
    assert report.auto_paused == 1
    row = conn.execute("SELECT active, paused_note FROM schedules").fetchone()
    assert row is not None and not row["active"]
    assert row["paused_note"].startswith("auto-paused after 2 consecutive failed runs")
    assert "step extract: boom" in row["paused_note"]
    trigger.run_once(conn, now=utc("2026-05-01T10:04:10"))
    assert outcomes(conn, sid)[-1] == "paused"


def finish_pending_runs(conn: Conn, outcome: Outcome, now: datetime | None = None) -> None:
    """Claim the due runs and finish them all with `outcome` (`now=None`: the database
    clock, at which a released DAG step is due)."""
    claimed = transitions.claim(conn, "test-worker", 10, 30, now=now)
    transitions.finish_many(
        conn, "test-worker", [transitions.Finish(j.run_id, j.attempt, outcome) for j in claimed]
    )


def fail_pending_runs(conn: Conn, now: datetime) -> None:
    finish_pending_runs(conn, Outcome(OutcomeStatus.FAILED, error="boom", retryable=False), now)


def complete_pending_runs(conn: Conn) -> None:
    finish_pending_runs(conn, Outcome(OutcomeStatus.COMPLETED))


def test_run_now_is_a_recorded_fire_that_leaves_the_schedule_alone(conn: Conn) -> None:
    sid = add(conn, "manual", cron="0 3 * * *")
    before = conn.execute("SELECT next_fire_time FROM schedules").fetchone()
    now = utc("2026-05-01T10:17:42")
    run_id = schedules.run_now(conn, "manual", now=now).run_id
    run = conn.execute("SELECT fire_time, run_at, status FROM job_runs WHERE id = %s", (run_id,))
    assert run.fetchone() == {"fire_time": now, "run_at": now, "status": "pending"}
    [row] = ledger(conn, sid)
    assert (row["outcome"], row["manual"], row["run_id"]) == ("enqueued", True, run_id)
    assert conn.execute("SELECT next_fire_time FROM schedules").fetchone() == before


def test_two_leaders_at_once_fire_a_workflow_schedule_once_per_fire_time(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as setup:
        define_etl(setup)
        sid = add(
            setup,
            "etl-every-minute",
            cron="* * * * *",
            handler=None,
            workflow="etl",
            overlap=OverlapPolicy.ALLOW,
        )
    instants = [T0 + timedelta(seconds=30 + 20 * k) for k in range(15)]  # five minutes
    tick_as_two_leaders(db_url, instants, settings())
    expected = [utc("2026-05-01T10:00") + timedelta(minutes=k) for k in range(5)]
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        dag_runs = conn.execute(
            "SELECT d.fire_time, count(r.id) AS steps FROM dag_runs d "
            "JOIN job_runs r ON r.dag_run_id = d.id WHERE d.schedule_id = %s "
            "GROUP BY d.id, d.fire_time ORDER BY d.fire_time",
            (sid,),
        ).fetchall()
    assert [d["fire_time"] for d in dag_runs] == expected  # one DAG run per fire, no double
    assert {d["steps"] for d in dag_runs} == {2}
    assert [r["fire_time"] for r in ledger_rows(db_url, sid)] == expected


def ledger_rows(db_url: str, sid: Any) -> list[dict[str, Any]]:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return ledger(conn, sid)
