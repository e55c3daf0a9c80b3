"""History in day partitions: ended runs move out of the hot tables, and whole days go when
their retention has passed. The reaper calls both; `sundial history` shows what is kept.

The hot tables (`job_runs` and its relatives) hold what is live plus what ended recently,
so the claim's indexes stay small whatever the history holds. A run that ended more than
SUNDIAL_HOT_MINUTES ago (a dead letter: SUNDIAL_DEAD_LETTER_DAYS, so it can be retried in
place) moves, in one statement, with its attempts, log lines and DAG edges, into
`run_history` and its relatives, range-partitioned by `history_at`: the run's end, or a DAG
run's last step's end, so a DAG run never spans two days. The `all_*` views read hot and
history as one; pages and the API read through them.

Retention is DROP TABLE of a day's partitions, never a row-by-row DELETE: a day goes once
it is entirely older than SUNDIAL_RETENTION_DAYS, after its rows were exported to
SUNDIAL_ARCHIVE_DIR when that is set (gzip CSV per table and day, written then renamed, so
a half-written file never looks complete). A day holding DAG steps whose DAG run still has
an active step is kept until that step ends.

A day the mover has finished writing is vacuumed once by the reaper (`settle_days`):
frozen, all-visible and analysed, so reads of history by index never touch its heap.

Plain declarative partitioning: Sundial makes the days it needs (the mover makes the day of
whatever it moves, the reaper the next days ahead) and drops what it no longer keeps, so a
deployment needs no extension and no second scheduler for the partitions themselves.
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from psycopg import sql

from app.core.db import Conn, outside_transaction
from app.core.sql import query

# Hot table → history table. Migration 0033 made them; a migration adding a column to a
# hot table adds it to its history table too and re-creates its `all_*` view.
HISTORY_TABLES = {
    "job_runs": "run_history",
    "job_run_attempts": "run_attempt_history",
    "run_logs": "run_log_history",
    "job_run_deps": "run_dep_history",
    "dag_runs": "dag_run_history",
}
DAY = timedelta(days=1)
DAYS_AHEAD = 2  # days made ahead of need, so the mover seldom makes one itself
PARTITION_LOCK_KEY = 0x53554E484953  # "SUNHIS": making and dropping partitions
_PARTITION = re.compile(r"^(?P<parent>\w+)_p(?P<day>\d{8})$")


def is_history_table(name: str) -> bool:
    """A history table or one of its day partitions."""
    match = _PARTITION.match(name)
    return name in HISTORY_TABLES.values() or (
        match is not None and match["parent"] in HISTORY_TABLES.values()
    )


def partition_name(parent: str, day: date) -> str:
    return f"{parent}_p{day:%Y%m%d}"


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


@dataclass(frozen=True, slots=True)
class Cutoffs:
    """What is due to move: runs that ended before these moments (None keeps that kind
    hot). `key_before` holds runs with an idempotency key back: a key is unique among the
    hot runs only, so it stays there for its window."""

    hot_before: datetime | None
    dead_before: datetime | None
    key_before: datetime | None

    def params(self) -> dict[str, datetime | None]:
        return {
            "hot_before": self.hot_before,
            "dead_before": self.dead_before,
            "key_before": self.key_before,
        }


@dataclass(frozen=True, slots=True)
class Moved:
    lone_runs: int = 0
    dag_runs: int = 0
    dag_steps: int = 0

    @property
    def runs(self) -> int:
        return self.lone_runs + self.dag_steps


def move(conn: Conn, cutoffs: Cutoffs, *, limit: int = 1000) -> Moved:
    """Move up to `limit` runs outside DAGs and `limit` whole DAG runs that are due, in one
    transaction, making the days they land in first."""
    params = {**cutoffs.params(), "limit": limit}
    with conn.transaction():
        lone = conn.execute(query("history", "history_lock_lone"), params).fetchall()
        # Steps are locked first, then checked again and moved by a second statement: one
        # statement's snapshot would predate a retry committed while it waited for a step.
        dags = conn.execute(query("history", "history_lock_dags"), params).fetchall()
        if not lone and not dags:
            return Moved()
        ensure_days(conn, {r["history_at"].astimezone(UTC).date() for r in lone + dags})
        runs = conn.execute(
            query("history", "history_move_lone"),
            {"ids": [r["id"] for r in lone], "at": [r["history_at"] for r in lone]},
        ).fetchone()
        moved = conn.execute(
            query("history", "history_move_dags"),
            {
                **cutoffs.params(),
                "ids": [r["id"] for r in dags],
                "steps": [r["steps"] for r in dags],
                "at": [r["history_at"] for r in dags],
            },
        ).fetchone()
    assert runs is not None and moved is not None
    return Moved(int(runs["runs"]), int(moved["dag_runs"]), int(moved["runs"]))


def _named(statement: str, name: str, **more: sql.Composable) -> sql.Composed:
    """A statement of history.sql with its partition's name (and `more`) filled in."""
    return sql.SQL(query("history", statement)).format(name=sql.Identifier(name), **more)


def ensure_days(conn: Conn, days: Iterable[date]) -> list[str]:
    """Make the partitions of these days that do not exist yet (every history table's), in
    the caller's transaction or one of their own; the names made."""
    wanted = sorted(set(days))
    if not wanted:
        return []
    made: list[str] = []
    with conn.transaction():
        conn.execute(query("history", "history_partition_lock"), {"key": PARTITION_LOCK_KEY})
        existing = {p.name for p in partitions(conn)}
        for day in wanted:
            for parent in HISTORY_TABLES.values():
                name = partition_name(parent, day)
                if name in existing:
                    continue
                bounds = {
                    "parent": sql.Identifier(parent),
                    "start": sql.Literal(day_start(day)),
                    "end": sql.Literal(day_start(day + DAY)),
                }
                conn.execute(_named("history_make_partition", name, **bounds))
                made.append(name)
    return made


def ensure_ahead(conn: Conn, today: date) -> list[str]:
    """Today's partitions and the next DAYS_AHEAD days'."""
    return ensure_days(conn, (today + i * DAY for i in range(DAYS_AHEAD + 1)))


@dataclass(frozen=True, slots=True)
class Partition:
    parent: str
    name: str
    day: date
    bytes: int


def partitions(conn: Conn) -> list[Partition]:
    """Every day partition of the history tables, oldest day first."""
    rows = conn.execute(
        query("history", "history_partitions"), {"parents": list(HISTORY_TABLES.values())}
    ).fetchall()
    found = []
    for row in rows:
        match = _PARTITION.match(row["name"])
        if match is None:  # someone else's partition: not ours to count or drop
            continue
        day = date.fromisoformat(match["day"])  # YYYYMMDD is ISO 8601's basic form
        found.append(Partition(row["parent"], row["name"], day, int(row["bytes"])))
    return sorted(found, key=lambda p: (p.day, p.parent))


@dataclass(frozen=True, slots=True)
class DayInHistory:
    """One day of history: its partitions' rows and bytes, per history table."""

    day: date
    rows: dict[str, int]
    bytes: int

    @property
    def runs(self) -> int:
        return self.rows.get("run_history", 0)


def days(conn: Conn) -> list[DayInHistory]:
    """Every day kept, oldest first, with exact row counts (a count per partition: a
    second or so over a month of a million runs a day)."""
    by_day: dict[date, list[Partition]] = {}
    for p in partitions(conn):
        by_day.setdefault(p.day, []).append(p)
    kept = []
    for day, parts in sorted(by_day.items()):
        rows = {p.parent: int(_count(conn, p.name)) for p in parts}
        kept.append(DayInHistory(day, rows, sum(p.bytes for p in parts)))
    return kept


def _count(conn: Conn, table: str) -> int:
    row = conn.execute(_named("history_count_partition", table)).fetchone()
    assert row is not None
    return int(row["n"])


def archive_day(conn: Conn, day: date, folder: Path) -> list[Path]:
    """Export every history table's rows of `day` to `<folder>/<table>/<day>.csv.gz` (a
    header line, then PostgreSQL's CSV); the files written. A file is written under a
    temporary name and renamed once complete and on disk."""
    written = []
    for parent in HISTORY_TABLES.values():
        name = partition_name(parent, day)
        if name not in {p.name for p in partitions(conn)}:
            continue
        target = folder / parent / f"{day:%Y-%m-%d}.csv.gz"
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        copy = _named("history_copy_partition", name)
        with gzip.open(partial, "wb") as out, conn.cursor().copy(copy) as rows:
            for chunk in rows:
                out.write(chunk)
        with open(partial, "rb") as done:
            os.fsync(done.fileno())
        partial.replace(target)
        written.append(target)
    return written


def settle_days(conn: Conn, *, written_before: date, limit: int = 1) -> list[str]:
    """Vacuum (freeze and analyze) up to `limit` partitions of the days before
    `written_before`, which the mover no longer writes, not yet settled; the names settled.
    VACUUM runs outside a transaction: on a connection in one (or not autocommit) this
    does nothing."""
    if not outside_transaction(conn):
        return []
    done = [p.name for p in partitions(conn) if p.day < written_before]
    if not done or limit <= 0:
        return []
    rows = conn.execute(query("history", "history_unsettled_partitions"), {"names": done})
    names = [row["name"] for row in rows.fetchall()][:limit]
    for name in names:
        conn.execute(_named("history_settle_partition", name))
    return names


@dataclass(frozen=True, slots=True)
class Dropped:
    days: list[date]
    kept_for_active: list[date]  # past retention, but an active DAG step reads from them
    archived: list[Path]


def drop_expired(
    conn: Conn, *, keep_since: date, archive_to: Path | None = None, limit: int = 3
) -> Dropped:
    """Drop up to `limit` whole days older than `keep_since` (every history table's
    partition of each), archiving each first when `archive_to` is set. A day an active DAG
    step still reads from is kept, and said so."""
    dropped: list[date] = []
    kept: list[date] = []
    archived: list[Path] = []
    expired = sorted({p.day for p in partitions(conn) if p.day < keep_since})
    for day in expired:
        if len(dropped) >= limit:
            break
        relatives = conn.execute(
            query("history", "history_active_relatives"),
            {"day": day_start(day), "next_day": day_start(day + DAY)},
        ).fetchone()
        if relatives is not None and relatives["runs"]:
            kept.append(day)
            continue
        if archive_to is not None:
            archived += archive_day(conn, day, archive_to)
        with conn.transaction():
            conn.execute(query("history", "history_partition_lock"), {"key": PARTITION_LOCK_KEY})
            for p in partitions(conn):
                if p.day == day:
                    conn.execute(_named("history_drop_partition", p.name))
        dropped.append(day)
    return Dropped(dropped, kept, archived)
