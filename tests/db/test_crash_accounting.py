"""A run that failed, a run whose worker died under it (a crash) and a run claimed but not
yet begun when its worker died end differently: only the first spends attempts, crashes
are counted, a suspect runs alone in a process of its own where only its own crashes
quarantine it, and a hand-back keeps its place in line."""

from __future__ import annotations

import random
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.catalog import job_definitions
from app.core import limits
from app.core.db import Conn
from app.executors.outcomes import process_died
from app.handlers.jobs import Outcome
from app.runs import submission, transitions
from app.runs.fingerprints import QUARANTINED
from app.runs.run_inserts import NewRun
from app.runs.transitions import Finish
from tests.helpers.processes import query, services, status_counts
from tests.helpers.waits import db_now, wait_until


def later(conn: Conn) -> Any:
    return db_now(conn) + timedelta(minutes=5)


def run_row(conn: Conn, run_id: int) -> dict[str, Any]:
    found: dict[str, Any] = conn.execute(
        "SELECT * FROM job_runs WHERE id = %s", (run_id,)
    ).fetchone()
    return found


def claimed_ids(jobs: list[Any]) -> list[int]:
    return [job.run_id for job in jobs]


# ---- the reaper tells the three endings apart ---------------------------------------------


def test_a_run_claimed_but_not_begun_is_handed_back_in_its_place_without_an_attempt(
    conn: Conn,
) -> None:
    # A process run begins only when a pool child takes it: claimed, it has not begun.
    waiting = submission.submit(conn, NewRun("noop", max_retries=0, execution_model="process")).id
    (job,) = transitions.claim(conn, "w1", 1, 30)
    newer = [submission.submit(conn, NewRun("noop")).id for _ in range(3)]
    (reaped,) = transitions.reap(conn, now=later(conn))
    assert (reaped.run_id, reaped.status, reaped.crashed, reaped.crash_count) == (
        waiting,
        "pending",
        False,
        0,
    )
    row = run_row(conn, waiting)
    assert row["last_error"].startswith("lease expired before attempt 1 began")
    assert row["crash_count"] == 0 and not row["quarantined"]
    # no attempt spent: with max_retries 0 it still runs, and ahead of the runs sent after it
    assert claimed_ids(transitions.claim(conn, "w2", 1, 30)) == [waiting]
    outcome = conn.execute(
        "SELECT outcome FROM job_run_attempts WHERE run_id = %s", (waiting,)
    ).fetchall()
    assert [r["outcome"] for r in outcome] == ["released"]
    assert set(newer).isdisjoint(claimed_ids([job]))


def test_a_process_run_a_child_took_counts_as_begun(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop", execution_model="process")).id
    (job,) = transitions.claim(conn, "w1", 1, 30)
    transitions.mark_begun(conn, "w1", [(job.run_id, job.attempt)])
    transitions.mark_begun(
        conn, "w-other", [(job.run_id, job.attempt + 1)]
    )  # not its attempt: ignored
    (reaped,) = transitions.reap(conn, now=later(conn))
    assert reaped.crashed and reaped.crash_count == 1 and reaped.status == "pending"
    assert run_row(conn, run_id)["began_attempt"] == job.attempt


def crashed_in_its_own_process(conn: Conn, run_id: int) -> Finish:
    """Claim the suspect `run_id` and report that its process of its own died."""
    (job,) = transitions.claim(conn, "w1", 1, 30)
    assert job.run_id == run_id and job.crash_count > 0
    return Finish(run_id, job.attempt, process_died(-9), suspect=True)


def test_a_crash_spends_no_retry_and_the_job_decides_when_it_is_quarantined(
    conn: Conn,
) -> None:
    job_definitions.create(
        conn,
        job_definitions.JobSpec(name="fragile", handler="noop", max_retries=0, max_crashes=2),
        actor="test",
    )
    job = job_definitions.get(conn, "fragile")
    run_id = submission.submit(conn, NewRun("noop", max_retries=0, job_id=job["id"])).id
    transitions.claim(conn, "w1", 1, 30)
    (reaped,) = transitions.reap(conn, now=later(conn))  # its worker died: a suspect now
    assert (reaped.status, reaped.crash_count, reaped.quarantined) == ("pending", 1, False)
    endings = []
    for _ in range(2):  # then its own process dies, seen by its worker: evidence
        assert transitions.finish_many(conn, "w1", [crashed_in_its_own_process(conn, run_id)])
        row = run_row(conn, run_id)
        endings.append((row["status"], row["crash_count"], row["lone_crashes"], row["quarantined"]))
    assert endings == [("pending", 2, 1, False), ("failed", 3, 2, True)]
    assert row["last_error"].startswith(
        "quarantined after 3 crashes, 2 of them in a process of its own: worker process died"
    )
    assert row["error_fingerprint"] == QUARANTINED
    history = conn.execute(
        "SELECT outcome, requeued FROM job_run_attempts WHERE run_id = %s ORDER BY attempt",
        (run_id,),
    ).fetchall()
    assert [(h["outcome"], h["requeued"]) for h in history] == [
        ("lost", True),
        ("failed", True),
        ("failed", False),
    ]
    # a person's retry gives it a fresh crash budget
    transitions.retry(conn, run_id)
    row = run_row(conn, run_id)
    assert (row["status"], row["crash_count"], row["lone_crashes"], row["quarantined"]) == (
        "pending",
        0,
        0,
        False,
    )


def test_a_cancel_wins_over_a_crash_at_the_limit(conn: Conn) -> None:
    run_id = submission.submit(conn, NewRun("noop", max_retries=0)).id
    transitions.claim(conn, "w0", 1, 30)
    transitions.reap(conn, now=later(conn))  # a suspect
    conn.execute("UPDATE job_runs SET lone_crashes = 2 WHERE id = %s", (run_id,))
    crash = crashed_in_its_own_process(conn, run_id)
    assert transitions.cancel(conn, run_id) == "running"  # requested while it ran
    transitions.finish_many(conn, "w1", [crash])
    row = run_row(conn, run_id)
    assert (row["status"], row["quarantined"], row["crash_count"]) == ("cancelled", False, 2)


def test_a_first_death_of_a_child_is_an_ordinary_failure(conn: Conn) -> None:
    """Only a suspect's crashes are counted: a process run whose child dies on its first
    try spends an attempt, like any failure."""
    run_id = submission.submit(conn, NewRun("noop", max_retries=0, execution_model="process")).id
    (job,) = transitions.claim(conn, "w1", 1, 30)
    transitions.finish_many(conn, "w1", [Finish(run_id, job.attempt, process_died(-11))])
    row = run_row(conn, run_id)
    assert (row["status"], row["crash_count"], row["quarantined"]) == ("failed", 0, False)


def test_worker_deaths_alone_quarantine_a_run_only_at_ten_times_its_limit(conn: Conn) -> None:
    """A worker killed from outside is no evidence against what it ran, alone or not; a run
    whose workers keep dying under it is set aside all the same, much later."""
    job_definitions.create(
        conn, job_definitions.JobSpec(name="once", handler="noop", max_crashes=1), actor="test"
    )
    job = job_definitions.get(conn, "once")
    run_id = submission.submit(conn, NewRun("noop", max_retries=0, job_id=job["id"])).id
    ceiling = limits.WORKER_DEATHS_PER_CRASH
    statuses = []
    for _ in range(ceiling):
        (claimed,) = transitions.claim(conn, "w1", 10, 30)  # a suspect after the first: alone
        assert claimed.run_id == run_id
        (reaped,) = transitions.reap(conn, now=later(conn))
        statuses.append(reaped.status)
    assert statuses == ["pending"] * (ceiling - 1) + ["failed"]
    row = run_row(conn, run_id)
    assert (row["crash_count"], row["lone_crashes"], row["quarantined"]) == (ceiling, 0, True)
    assert row["last_error"].startswith(f"quarantined after {ceiling} crashes")


def test_a_job_refuses_a_crash_limit_out_of_range(conn: Conn) -> None:
    for bad in (0, -1, 101):
        try:
            job_definitions.create(
                conn,
                job_definitions.JobSpec.model_construct(name="j", handler="noop", max_crashes=bad),
                actor="test",
            )
        except job_definitions.JobError as exc:
            assert exc.field == "max_crashes" and "between 1 and 100" in str(exc)
        else:
            raise AssertionError(f"max_crashes {bad} was accepted")
    assert conn.execute("SELECT count(*) AS n FROM job_definitions").fetchone()["n"] == 0


# ---- a suspect runs alone, first in line -------------------------------------------------


def crash_once(conn: Conn, run: NewRun) -> int:
    """Submit `run`, claim it alone and let its lease expire: a suspect, crashed once."""
    run_id = submission.submit(conn, run).id
    assert claimed_ids(transitions.claim(conn, "w0", 1, 30)) == [run_id]
    transitions.reap(conn, now=later(conn))
    return run_id


def test_a_suspect_is_claimed_alone_and_before_the_runs_sent_after_it(conn: Conn) -> None:
    suspect = crash_once(conn, NewRun("noop"))
    after = [submission.submit(conn, NewRun("noop")).id for _ in range(5)]
    # a worker busy with other runs takes nothing: it drains, and the suspect keeps its place
    assert transitions.claim(conn, "busy", 10, 30, busy=True) == []
    # an idle worker takes the suspect and nothing else
    (job,) = transitions.claim(conn, "idle", 10, 30)
    assert job.run_id == suspect and job.crash_count == 1
    transitions.finish_many(conn, "idle", [Finish(suspect, job.attempt, Outcome.completed())])
    assert sorted(claimed_ids(transitions.claim(conn, "idle", 10, 30))) == after


def test_runs_ahead_of_a_suspect_are_claimed_without_it(conn: Conn) -> None:
    suspect = crash_once(conn, NewRun("noop", priority=1))
    urgent = [submission.submit(conn, NewRun("noop", priority=5)).id for _ in range(3)]
    behind = submission.submit(conn, NewRun("noop", priority=1)).id
    assert sorted(claimed_ids(transitions.claim(conn, "w1", 10, 30))) == urgent
    assert claimed_ids(transitions.claim(conn, "w2", 10, 30)) == [suspect]
    assert claimed_ids(transitions.claim(conn, "w3", 10, 30)) == [behind]


# ---- real workers -------------------------------------------------------------------------


def submit(db_url: str, *new_runs: NewRun) -> list[int]:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        return [s.id for s in submission.submit_many(conn, list(new_runs))]


def test_a_handler_that_kills_its_worker_is_quarantined_and_its_neighbours_complete(
    db_url: str, tmp_path: Path
) -> None:
    """The culprit kills its worker with 7 neighbours in flight, once: every neighbour ends
    completed on its next try, and the culprit, now running in a process of its own, kills
    only that process, 3 times, and is quarantined."""
    neighbours = submit(db_url, *[NewRun("sleep", {"seconds": 0.5}, max_retries=0)] * 7)
    (culprit,) = submit(db_url, NewRun("crash", max_retries=0))
    with services(db_url, tmp_path) as start:
        start("reaper")
        worker = start("worker", "--concurrency", "8")
        deaths = 0
        deadline = time.monotonic() + 120
        while status_counts(db_url) != {"completed": 7, "failed": 1}:
            assert time.monotonic() < deadline, status_counts(db_url)
            if worker.proc.poll() is not None:  # as a process manager would: start another
                deaths += 1
                worker = start("worker", "--concurrency", "8")
            time.sleep(0.2)
    rows = {
        r["id"]: r
        for r in query(
            db_url, "SELECT id, status, crash_count, lone_crashes, quarantined FROM job_runs"
        )
    }
    # the deaths of its own process are the evidence: 3 of them, after its worker's death
    assert rows[culprit]["quarantined"] and rows[culprit]["lone_crashes"] == 3
    assert rows[culprit]["crash_count"] == 4 and deaths >= 1
    for run_id in neighbours:
        assert rows[run_id]["status"] == "completed" and not rows[run_id]["quarantined"]
        assert rows[run_id]["crash_count"] <= 1  # only the first death took neighbours along


def test_twenty_worker_kills_in_a_loaded_fleet_dead_letter_no_run(
    db_url: str, tmp_path: Path
) -> None:
    """Runs that never fail and have no retry at all: SIGKILLs of busy workers cost them
    nothing but time."""
    total = 1200
    submit(db_url, *[NewRun("sleep", {"seconds": 0.2}, max_retries=0)] * total)
    rand = random.Random(20)
    kills = 0
    with services(db_url, tmp_path) as start:
        start("reaper")
        fleet = [start("worker", "--concurrency", "10") for _ in range(3)]

        def restart_exited() -> None:
            """As a process manager would: a worker that exited (one that found no free
            database connection while the suite runs in parallel, say) is started again."""
            for i, worker in enumerate(fleet):
                if worker.proc.poll() is not None:
                    fleet[i] = start("worker", "--concurrency", "10")

        while kills < 20 and status_counts(db_url).get("completed", 0) < total:
            restart_exited()
            victim = fleet.pop(rand.randrange(len(fleet)))
            try:
                victim.wait_for_log("worker started", timeout=60)
            except AssertionError:  # it exited before it started: not a kill
                fleet.append(start("worker", "--concurrency", "10"))
                continue
            time.sleep(rand.uniform(0.3, 1.0))  # mid-work
            victim.kill()
            kills += 1
            fleet.append(start("worker", "--concurrency", "10"))
        deadline = time.monotonic() + 240
        while status_counts(db_url).get("completed", 0) < total:
            assert time.monotonic() < deadline, (
                status_counts(db_url),
                query(
                    db_url,
                    "SELECT status, crash_count, count(*) FROM job_runs "
                    "WHERE status <> 'completed' GROUP BY 1, 2",
                ),
            )
            restart_exited()
            time.sleep(0.2)
    assert status_counts(db_url) == {"completed": total}
    (hit,) = query(
        db_url,
        "SELECT count(*) FILTER (WHERE crash_count > 0) AS crashed, "
        "count(*) FILTER (WHERE quarantined) AS quarantined FROM job_runs",
    )
    assert kills == 20 and hit["quarantined"] == 0
    assert hit["crashed"] > 0, "the kills never hit a run in flight"


def test_a_suspect_whose_worker_is_killed_from_outside_is_never_quarantined(
    db_url: str, tmp_path: Path
) -> None:
    """Its worker killed under it while it runs alone, more often than its crash limit, a
    suspect still completes: only its own process dying counts against it."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        run_id = crash_once(conn, NewRun("sleep", {"seconds": 1.5}, max_retries=0))
    kills = 0
    with services(db_url, tmp_path) as start:
        start("reaper")
        attempt = 1  # crash_once's
        while kills <= limits.DEFAULT_MAX_CRASHES:
            worker = start("worker", "--concurrency", "4")
            attempt = wait_until(
                lambda n=attempt: began_after(db_url, run_id, n), "the suspect running", 60, worker
            )
            worker.kill()
            kills += 1
        start("worker", "--concurrency", "4")
        wait_until(lambda: status_counts(db_url) == {"completed": 1}, "it completed", 120)
    (row,) = query(db_url, f"SELECT crash_count, lone_crashes FROM job_runs WHERE id = {run_id}")
    assert (row["crash_count"], row["lone_crashes"]) == (1 + kills, 0)


def began_after(db_url: str, run_id: int, attempt: int) -> int | None:
    """The attempt of `run_id` running now, once one later than `attempt` has begun."""
    (row,) = query(
        db_url, f"SELECT status, began_attempt, attempt FROM job_runs WHERE id = {run_id}"
    )
    begun = row["status"] == "running" and row["began_attempt"] == row["attempt"] > attempt
    return int(row["attempt"]) if begun else None
