"""A worker's claims and finishes tell the dashboard that runs changed at most every quarter
second, yet the dashboard always hears of the last change: a real worker process, a real
LISTEN connection on the hub's channel."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.runs.run_inserts import NewRun
from app.services.dashboard_tells import TELL_SECONDS
from app.web.events import EVENTS_CHANNEL
from tests.helpers.processes import services, status_counts
from tests.helpers.waits import wait_until
from tests.helpers.workers import submit


class HubEar:
    """Listens as the dashboard's hub does; for each 'runs' notification, when it came and
    how many runs had completed by then (read on another connection)."""

    def __init__(self, db_url: str) -> None:
        self.heard: list[tuple[float, int]] = []
        self._db_url = db_url
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)

    def __enter__(self) -> HubEar:
        self._thread.start()
        assert self._listening.wait(10)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _listen(self) -> None:
        with (
            psycopg.connect(self._db_url, autocommit=True) as ear,
            psycopg.connect(self._db_url, autocommit=True, row_factory=dict_row) as reader,
        ):
            ear.execute(f"LISTEN {EVENTS_CHANNEL}")
            self._listening.set()
            while not self._stop.is_set():
                for note in ear.notifies(timeout=0.2):
                    if note.payload == "runs":
                        done = _completed(reader)
                        self.heard.append((time.monotonic(), done))


def _completed(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) AS n FROM job_runs WHERE status = 'completed'").fetchone()
    return int(row["n"]) if row else 0


def test_the_dashboard_hears_of_a_burst_a_few_times_a_second_and_of_its_last_change(
    db_url: str, tmp_path: Path
) -> None:
    runs = 400
    with services(db_url, tmp_path) as start, HubEar(db_url) as ear:
        worker = start("worker", "--concurrency", "20")
        began = time.monotonic()
        submit(db_url, *(NewRun("sleep", {"seconds": 0.02}) for _ in range(runs)))
        wait_until(lambda: status_counts(db_url).get("completed") == runs, "drained", 60, worker)
        drained = time.monotonic()
        # the last change is told even though no statement follows it
        wait_until(lambda: any(done == runs for _, done in ear.heard), "the last change told")
        assert worker.stop() == 0
    during = [at for at, _ in ear.heard if at <= drained]
    # hundreds of claims and finishes, told at most once a quarter second (plus the first)
    most = (drained - began) / TELL_SECONDS + 2
    assert 1 <= len(during) <= most, (len(during), most)


def test_a_lone_run_is_told_when_it_starts_and_when_it_ends(db_url: str, tmp_path: Path) -> None:
    with services(db_url, tmp_path) as start, HubEar(db_url) as ear:
        worker = start("worker", "--concurrency", "2")
        wait_until(lambda: ear.heard or _registered(db_url), "the worker up", 30, worker)
        time.sleep(TELL_SECONDS)  # its first empty claim has used the interval's tell
        submit(db_url, NewRun("sleep", {"seconds": 0.05}))
        wait_until(lambda: status_counts(db_url).get("completed") == 1, "completed", 30, worker)
        wait_until(lambda: any(done == 1 for _, done in ear.heard), "its end told", 5, worker)
        assert any(done == 0 for _, done in ear.heard), "its start was told"
        worker.stop()


def _registered(db_url: str) -> bool:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM workers").fetchone()
        return bool(row and row[0])
