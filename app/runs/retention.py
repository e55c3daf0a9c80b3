"""Deleting the history of ended runs once their retention has passed, and the sign-ins
that can no longer be used (the reaper calls this every few minutes). Not a transition: no
run changes status, runs that ended long ago go, with their attempts; a DAG run goes whole.
The statements are in `app/core/sql/retention.sql`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.core.db import Conn
from app.core.sql import query


@dataclass(frozen=True, slots=True)
class Pruned:
    lone_runs: int  # runs outside DAGs deleted
    dag_runs: int
    dag_steps: int  # the runs of those DAG runs

    @property
    def runs(self) -> int:
        return self.lone_runs + self.dag_steps


def prune(
    conn: Conn,
    *,
    runs_before: datetime | None,
    failed_before: datetime | None,
    limit: int = 1000,
) -> Pruned:
    """Delete up to `limit` runs outside DAGs and `limit` DAG runs whose retention has
    passed (see `run_prune`): ended well, cancelled or skipped before `runs_before`, failed
    or timed out before `failed_before`; None keeps that kind forever."""
    params = {"runs_before": runs_before, "failed_before": failed_before, "limit": limit}
    with conn.transaction():
        lone = conn.execute(query("retention", "run_prune"), params).fetchone()
        # A DAG run's steps are locked first, then checked again and deleted by a second
        # statement: one statement's snapshot would predate a retry or a new step
        # committed while it waited for that step's row, and delete them with the rest.
        locked = conn.execute(query("retention", "dag_run_lock_prunable"), params).fetchall()
        ids = {"ids": [r["id"] for r in locked], "steps": [r["steps"] for r in locked]}
        dags = conn.execute(query("retention", "dag_run_prune"), {**params, **ids}).fetchone()
    assert lone is not None and dags is not None
    return Pruned(int(lone["runs"]), int(dags["dag_runs"]), int(dags["runs"]))


@dataclass(frozen=True, slots=True)
class PrunedSignIns:
    sessions: int  # expired web sessions deleted
    links: int  # expired sign-in links deleted


def prune_sign_ins(conn: Conn, *, now: datetime | None = None, limit: int = 1000) -> PrunedSignIns:
    """Delete up to `limit` web sessions and `limit` sign-in links that expired by `now`
    (None: the database clock). Signing out deletes a session at once; these are the ones
    nobody signed out of, and links nobody used."""
    params = {"now": now, "limit": limit}
    with conn.transaction():
        sessions = conn.execute(query("retention", "session_prune"), params).fetchone()
        links = conn.execute(query("retention", "sign_in_link_prune"), params).fetchone()
    assert sessions is not None and links is not None
    return PrunedSignIns(int(sessions["sessions"]), int(links["links"]))
