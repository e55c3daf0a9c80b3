"""Firing schedules in groups changes nothing any schedule gets. A varied fleet (rules,
zones, spreads, overlap and catch-up policies, pauses, runs still active, workflows, a
calendar) fired over several ticks with an outage between them ends with the same runs,
ledger rows and next fires as a copy of it fired with every schedule planned on its own."""

from __future__ import annotations

import random
import re
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg.rows import dict_row

from app.runs import transitions
from app.scheduling import calendars, fire_batches, schedules
from app.scheduling.calendars import CalendarSpec
from app.scheduling.fire_decisions import OverlapPolicy
from app.services.trigger import Trigger
from tests.helpers.databases import with_database
from tests.helpers.schedules import T0, add, define_etl, settings
from tests.helpers.waits import utc

CRONS = ["0 * * * *", "*/15 * * * *", "30 9 * * *", "0 10 * * *"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York"]
TICKS = [
    utc("2026-05-01T10:00:05"),
    utc("2026-05-01T10:05:05"),
    utc("2026-05-01T10:10:05"),
    utc("2026-05-01T10:15:05"),
    utc("2026-05-01T13:00:05"),  # after an outage of nearly three hours
    utc("2026-05-01T13:05:05"),
]


def build_fleet(conn: psycopg.Connection[Any], rng: random.Random) -> None:
    define_etl(conn)
    calendars.create(conn, CalendarSpec(name="Germany", country="de"), actor="test")
    for i in range(160):
        spec: dict[str, Any] = {
            "cron": rng.choice(CRONS),
            "timezone": rng.choice(ZONES),
            "overlap": rng.choice(list(OverlapPolicy)),
            "exact_minute": rng.random() < 0.3,
            "spread_seconds": rng.choice([60, 60, 600]),
        }
        if i % 2:  # the plain half: few rules and policies, so groups form
            add(
                conn,
                f"s{i}",
                now=T0,
                cron=rng.choice(["0 * * * *", "*/5 * * * *"]),
                timezone=rng.choice(ZONES[:2]),
                exact_minute=False,
                spread_seconds=rng.choice([60, 600]),
                overlap=rng.choice([OverlapPolicy.ALLOW, OverlapPolicy.SKIP]),
            )
            continue
        catchup = rng.choice(["latest", "latest", "all", "limit"])
        if catchup != "latest":
            spec.update(catchup=True, catchup_limit=2 if catchup == "limit" else None)
        if rng.random() < 0.2:
            spec["catchup_window_seconds"] = 3600
        if rng.random() < 0.1:
            spec.update(handler=None, workflow="etl")
        add(conn, f"s{i}", now=T0, **spec)
        if rng.random() < 0.1:
            calendars.assign(conn, f"s{i}", "Germany", actor="test")
        if rng.random() < 0.1:
            until = rng.choice([None, utc("2026-05-01T12:00")])
            schedules.pause(conn, f"s{i}", note="maintenance", until=until, now=T0)
        if rng.random() < 0.15:
            schedules.run_now(conn, f"s{i}", now=T0)


def fire(url: str, rng: random.Random) -> dict[str, Any]:
    """Tick the trigger through TICKS, cancelling a few active runs between ticks (the same
    ones in either copy), and return what the schedules got."""
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        trigger = Trigger(settings(trigger_batch_size=50))
        for now in TICKS:
            trigger.run_once(conn, now=now)
            active = conn.execute(
                "SELECT id FROM job_runs WHERE schedule_id IS NOT NULL AND dag_run_id IS NULL "
                "AND status = 'pending' ORDER BY schedule_id, fire_time"
            ).fetchall()
            for row in active:
                if rng.random() < 0.5:
                    transitions.cancel(conn, row["id"], now=now)
        return outcome(conn)


def outcome(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Runs, ledger rows and schedules, with run and DAG run ids (which depend on insertion
    order) replaced by the (schedule, fire time) they belong to, or the fire time of a run
    a ledger row's detail names."""
    runs_by_id = {
        r["id"]: r
        for r in conn.execute(
            "SELECT id, schedule_id, fire_time, run_at, job_id, handler, status, dag_run_id "
            "FROM job_runs WHERE schedule_id IS NOT NULL"
        ).fetchall()
    }
    dag_runs = {
        d["id"]: (d["schedule_id"], d["fire_time"])
        for d in conn.execute("SELECT id, schedule_id, fire_time FROM dag_runs").fetchall()
    }
    run_rows = sorted(
        (r["schedule_id"], r["fire_time"], r["run_at"], r["job_id"], r["handler"], r["status"],
         dag_runs.get(r["dag_run_id"]))
        for r in runs_by_id.values()
    )  # fmt: skip

    def named_runs(detail: str | None) -> str | None:
        """The detail, with the run ids it names replaced by those runs' fire times."""
        if detail is None:
            return None

        def fire_times(ids: re.Match[str]) -> str:
            times = (runs_by_id[int(i)]["fire_time"].isoformat() for i in ids[1].split(", "))
            return "run " + ", ".join(times)

        return re.sub(r"\brun (\d+(?:, \d+)*)", fire_times, detail)

    fires = sorted(
        (f["schedule_id"], f["fire_time"], f["local_time"], f["outcome"], named_runs(f["detail"]),
         f["coalesced_count"], f["manual"],
         None if f["run_id"] is None else (runs_by_id[f["run_id"]]["schedule_id"],
                                           runs_by_id[f["run_id"]]["fire_time"]),
         dag_runs.get(f["dag_run_id"]))
        for f in conn.execute("SELECT * FROM schedule_fires").fetchall()
    )  # fmt: skip
    moved = sorted(
        (s["id"], s["next_fire_time"], s["active"], s["paused_until"])
        for s in conn.execute("SELECT * FROM schedules").fetchall()
    )
    return {"runs": run_rows, "fires": fires, "schedules": moved}


def test_a_fleet_fired_in_groups_gets_what_each_schedule_would_get_alone(
    db_url: str, server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        build_fleet(conn, random.Random(20261201))
    original = urlsplit(db_url).path.lstrip("/")
    copy = f"{original}_alone"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{original}"')
    try:
        shared: list[int] = []
        alike = fire_batches._fires_alike

        def recording(group: Any, plan: Any) -> bool:
            if alike(group, plan):
                shared.append(len(group["ids"]))
                return True
            return False

        monkeypatch.setattr(fire_batches, "_fires_alike", recording)
        grouped = fire(db_url, random.Random(7))
        assert sum(shared) > len(shared)  # groups did fire as one, several schedules each
        monkeypatch.setattr(fire_batches, "_fires_alike", lambda group, plan: False)
        alone = fire(with_database(db_url, copy), random.Random(7))
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
    assert len(grouped["runs"]) > 150 and len(grouped["fires"]) > 300
    assert {f[3] for f in grouped["fires"]} >= {
        "enqueued", "skipped_overlap", "queued", "coalesced", "paused", "excluded", "missed",
    }  # fmt: skip
    for part in ("schedules", "fires", "runs"):
        assert grouped[part] == alone[part], part


def test_groups_split_across_batches_fire_each_schedule_once_per_fire(
    conn: psycopg.Connection[Any],
) -> None:
    for i in range(30):
        add(conn, f"q{i}", cron="*/15 * * * *", overlap=OverlapPolicy.ALLOW)
    trigger = Trigger(settings(trigger_batch_size=7))
    first = trigger.run_once(conn, now=utc("2026-05-01T10:00:05"))
    assert (first.schedules, first.runs) == (30, 30)
    again = trigger.run_once(conn, now=utc("2026-05-01T10:00:06"))
    assert again.schedules == 0
    later = trigger.run_once(conn, now=utc("2026-05-01T10:15:05"))
    assert (later.schedules, later.runs) == (30, 30)
