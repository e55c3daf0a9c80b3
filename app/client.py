"""The Python API for applications that submit and manage runs.

    from app.client import Sundial

    with Sundial("postgresql://…/app") as sundial:
        run_id = sundial.submit("send_invoice", {"invoice": 42}, idempotency_key="inv-42")
        sundial.submit_many([NewRun("noop") for _ in range(10_000)])  # one round trip

With no URL, the same configuration as the `sundial` command is used (DATABASE_URL, or
the embedded PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from app.core import limits
from app.core.config import Settings
from app.core.db import Conn, connect, resolve_database_url
from app.core.sql import query
from app.runs import moved_runs, run_inserts, submission, transitions
from app.runs.run_actions import RunInHistory
from app.runs.run_inserts import NewRun

__all__ = ["NewRun", "Sundial"]


class Sundial:
    def __init__(self, database_url: str | None = None) -> None:
        self.url = (
            resolve_database_url(Settings.from_env()) if database_url is None else (database_url)
        )
        self._conn: Conn | None = None

    @property
    def conn(self) -> Conn:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.url, autocommit=True)
        return self._conn

    def submit(self, handler: str, args: dict[str, Any] | None = None, **options: Any) -> int:
        """Submit one run and return its id; options are the fields of `NewRun`."""
        unknown = sorted(set(options) - set(NewRun.__dataclass_fields__) - {"handler", "args"})
        if unknown:
            raise run_inserts.SubmitError(f"unknown submit option {unknown[0]!r}")
        return submission.submit(
            self.conn, NewRun(handler, {} if args is None else args, **options)
        ).id

    def submit_many(self, new_runs: Sequence[NewRun]) -> list[int]:
        """Submit many runs in one statement; ids in input order."""
        return [s.id for s in submission.submit_many(self.conn, new_runs)]

    def cancel(self, run_id: int) -> str | None:
        """Cancel a run (a running one is stopped by its worker): its status afterwards, or
        None when it had already ended (or there is no such run)."""
        return transitions.cancel(self.conn, limits.check_run_id("the run id", run_id))

    def retry(self, run_id: int) -> bool:
        """Queue a dead letter again (and, in a DAG, the steps it skipped); False when the run
        is not failed, timed out or cancelled (or there is no such run). A run that moved to
        the history no longer changes: `RunInHistory` says so and points to a re-run."""
        limits.check_run_id("the run id", run_id)
        if transitions.retry(self.conn, run_id) is not None:
            return True
        moved = moved_runs.refusal(self.conn, run_id, instead="submit a new run with its args")
        if moved is not None:
            raise RunInHistory(moved)
        return False

    def get(self, run_id: int) -> dict[str, Any] | None:
        """The run's row as a dict, or None."""
        limits.check_run_id("the run id", run_id)
        row = self.conn.execute(query("run_reads", "run_by_id"), {"id": run_id}).fetchone()
        return dict(row) if row else None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Sundial:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
