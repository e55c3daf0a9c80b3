"""How the attempts of runs whose jobs call dependencies ended, as calls of those
dependencies (`dependency_calls`): what their circuit breakers and retry budgets count
(`app.runs.breakers`). The finishes record them; nothing to do while no job names one.
Apart from `app.runs.breakers`, so that the worker imports none of the web's libraries."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime

from app.core.db import Conn
from app.core.sql import query

RECHECK_SECONDS = 1.0

_named: tuple[float, bool] | None = None  # (read at, whether any dependency is named)


def record_calls(
    conn: Conn, outcomes: Iterable[tuple[int, bool]], now: datetime | None = None
) -> None:
    """How these runs' attempts ended, as (run id, ok), as calls of the dependencies their
    jobs name (nothing to do while no job names one; read once a second)."""
    global _named
    clock = time.monotonic()
    if _named is None or clock - _named[0] >= RECHECK_SECONDS:
        row = conn.execute(query("breakers", "breaker_any")).fetchone()
        _named = (clock, bool(row and row["any"]))
    if not _named[1]:
        return
    pairs = list(outcomes)  # only now: a drain finishes thousands a second without any
    if not pairs:
        return
    conn.execute(
        query("breakers", "breaker_record_calls"),
        {"ids": [p[0] for p in pairs], "ok": [p[1] for p in pairs], "now": now},
    )


def forget() -> None:
    """Read afresh at the next finish whether any dependency is named (tests)."""
    global _named
    _named = None
