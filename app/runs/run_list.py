"""The list of runs, newest first, with filters and keyset paging: one rule for the runs
page and `sundial runs list` (named query `web.run_list`).

Paging is by id (ids grow with time): a page is the `limit` runs below `before_id`, and
the next (older) page starts below the last id shown, so page 10,000 costs what page 1
costs. Filters that match nothing known (a schedule name that does not exist) give an
empty page rather than an error.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from psycopg import Cursor
from psycopg.types.json import Jsonb

from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import like_literal, query
from app.runs import run_search
from app.runs.states import RunStatus

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
NO_SUCH_SCHEDULE = uuid.UUID(int=0)  # matches no run
# The list's statements are planned for each call's filter, never prepared: psycopg prepares
# a statement after a few calls, and PostgreSQL may then settle on one generic plan, which
# for these optional filters walks every run's id, hot and history, testing each filter
# (25 ms against 5 for a search over 60,000 runs in history, and growing with it).
UNPREPARED = False
# A search is planned with random reads priced as on an SSD (web.run_search_page_price):
# over a month of history (30 days x 1 M runs) a value no run holds took 6.9 s at the
# default price, walking every run's id; 3 ms reading each day's GIN index.
SEARCH_RANDOM_PAGE_COST = "1.1"


@dataclass(frozen=True, slots=True)
class RunFilter:
    """What to list; None means any."""

    status: str | None = None
    job: str | None = None  # a job definition's name, else a handler's
    schedule: str | None = None  # a schedule's name or id
    dag_run_id: uuid.UUID | None = None
    since: datetime | None = None  # created at or after
    until: datetime | None = None  # created before
    error: str | None = None  # text in the last error (case-insensitive)
    queue: str | None = None  # the named queue it waits or waited in
    search: str | None = None  # what it carried: `customer_id = 42` (app.runs.run_search)
    before_id: int | None = None
    limit: int = DEFAULT_PAGE_SIZE

    def check(self) -> RunFilter:
        """Raise UsageError, in words, for a filter no run could match by mistake."""
        if self.status is not None and self.status not in RunStatus.__members__.values():
            known = ", ".join(s.value for s in RunStatus)
            raise UsageError(f"status must be one of {known}, not {self.status!r}")
        if not 1 <= self.limit <= MAX_PAGE_SIZE:
            raise UsageError(f"limit must be between 1 and {MAX_PAGE_SIZE}")
        if self.before_id is not None and self.before_id < 1:
            raise UsageError("before id must be a positive run id")
        if self.since and self.until and self.since >= self.until:
            raise UsageError("the start of the time range must be before its end")
        if self.search is not None:
            run_search.parse(self.search)
        return self


@dataclass(frozen=True, slots=True)
class RunPage:
    runs: list[dict[str, Any]]
    older: RunFilter | None  # the filter of the next, older page; None on the last page


def parse_dag_run_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise UsageError(f"{text!r} is not a DAG run id (a UUID)") from None


def _like(text: str) -> str:
    """`50% off` -> `%50\\% off%`: the words as typed, anywhere in the error."""
    return f"%{like_literal(text)}%"


def _job_id(conn: Conn, job: str) -> uuid.UUID | None:
    row = conn.execute(query("web", "run_job_by_name"), {"job": job}).fetchone()
    return row["id"] if row else None


def _schedule_id(conn: Conn, schedule: str) -> uuid.UUID:
    row = conn.execute(query("web", "run_schedule_by_name"), {"schedule": schedule}).fetchone()
    return row["id"] if row else NO_SUCH_SCHEDULE


def search_params(search: str | None) -> dict[str, list[Jsonb] | None]:
    """The `args_any` and `result_any` parameters of a search (None: any), for the runs
    list's queries and the API's `api_run_page`."""
    found = run_search.parse(search) if search else run_search.Search()
    return {
        "args_any": [Jsonb(d) for d in found.args] or None,
        "result_any": [Jsonb(d) for d in found.result] or None,
    }


def filter_params(conn: Conn, where: RunFilter) -> dict[str, Any]:
    """The named queries' parameters for `where` (run_list, run_match_count and
    run_match_ids share one WHERE)."""
    # A job definition's name picks its runs (by index); any other name is a handler's.
    job_id = _job_id(conn, where.job) if where.job else None
    return {
        "before_id": where.before_id,
        "status": where.status,
        "job_id": job_id,
        "handler": where.job if where.job and job_id is None else None,
        "schedule_id": _schedule_id(conn, where.schedule) if where.schedule else None,
        "dag_run_id": where.dag_run_id,
        "since": where.since,
        "until": where.until,
        "error": _like(where.error) if where.error else None,
        "queue": where.queue,
        **search_params(where.search),
    }


@contextmanager
def planned(conn: Conn, params: dict[str, Any]) -> Iterator[None]:
    """Where the list's statements with `params` are planned: a search in a transaction of
    its own, with its price of a random read (SEARCH_RANDOM_PAGE_COST). Inside a caller's
    transaction the price lasts to that transaction's end (a bulk action's batch, whose
    other statements go by run id)."""
    if params.get("args_any") is None:
        yield
        return
    with conn.transaction():
        price = {"cost": SEARCH_RANDOM_PAGE_COST}
        conn.execute(query("web", "run_search_page_price"), price)
        yield


def execute(conn: Conn, file: str, name: str, params: dict[str, Any]) -> Cursor[dict[str, Any]]:
    """One of the list's statements (or the API's page of runs), planned for this call."""
    with planned(conn, params):
        return conn.execute(query(file, name), params, prepare=UNPREPARED)


def list_runs(conn: Conn, where: RunFilter) -> RunPage:
    """One page of runs matching `where`, newest first, and the filter of the older page."""
    where.check()
    params = {
        **filter_params(conn, where),
        "limit": where.limit + 1,  # one more tells whether an older page exists
    }
    rows = execute(conn, "web", "run_list", params).fetchall()
    runs = rows[: where.limit]
    older = replace(where, before_id=runs[-1]["id"]) if len(rows) > where.limit else None
    return RunPage(runs, older)


def count_matching(conn: Conn, where: RunFilter) -> tuple[int, int | None]:
    """How many runs `where` matches (its page and paging aside), and the newest one's id."""
    params = filter_params(conn, where)
    row = execute(conn, "web", "run_match_count", params).fetchone()
    assert row is not None
    return int(row["total"]), row["newest"]


def matching_ids(conn: Conn, where: RunFilter, *, before_id: int | None, limit: int) -> list[int]:
    """Ids of up to `limit` runs `where` matches below `before_id`, newest first."""
    params = {**filter_params(conn, replace(where, before_id=before_id)), "limit": limit}
    rows = execute(conn, "web", "run_match_ids", params).fetchall()
    return [row["id"] for row in rows]
