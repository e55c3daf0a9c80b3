"""A fairly shared queue's turns: its due runs key by key (the value of the runs' args field
`key_field`), `key_weights[key]` of a key's runs per turn, each key's own in claim order.

Reading them (`run_fair_candidates`) sorts every due run of the queue, too dear for every
claim of a long backlog; so the claims, which take turns (`queue_claim_turn`), keep them
in `queue_fair_turns` and take their runs off the front, reading them afresh once they are
`FRESH_SECONDS` old, used up, or no longer yield a whole claim. A new key or a run of higher
priority joins the turns at the next read, at most `FRESH_SECONDS` later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from app.core.db import Conn
from app.core.sql import query
from app.runs.limit_fit import Due

FRESH_SECONDS = 1.0
TURNS_READ = 250  # due runs read in turn order at a time


class FairTurns:
    """One limited claim's view of its queue's turns: `due` gives them (kept, or read
    afresh), `read` reads them afresh, `keep` stores what the claim left."""

    def __init__(self, conn: Conn, read: Mapping[str, Any], setting: Mapping[str, Any]) -> None:
        self.conn = conn
        self.queue, self.clock = setting["name"], setting["clock"]
        self.params = {**read, "full": "[]", "scan": TURNS_READ,
                       "weights": Jsonb(setting["key_weights"])}  # fmt: skip
        self.read_at: datetime = self.clock
        self.kept = False  # whether `due` gave the kept turns, not a fresh read

    def due(self) -> list[Due]:
        """The turns kept by the claims before, while fresh and not used up; else read."""
        row = self.conn.execute(
            query("queues", "queue_fair_turns_read"),
            {"queue": self.queue, "clock": self.clock, "fresh_seconds": FRESH_SECONDS},
        ).fetchone()
        if row is None or not row["fresh"] or not row["ids"]:
            return self.read()
        self.kept = True
        self.read_at = row["read_at"]
        return [Due(*d) for d in zip(row["ids"], row["keys"], row["suspects"], strict=True)]

    def read(self) -> list[Due]:
        """The turns read afresh from the queue's due runs."""
        self.kept, self.read_at = False, self.clock
        rows = self.conn.execute(query("runs", "run_fair_candidates"), self.params)
        return [Due(r["id"], r["key"], r["suspect"]) for r in rows]

    def keep(self, due: Sequence[Due], taken: set[int]) -> None:
        """Store the turns left once the runs in `taken` (claimed, or no longer waiting)
        are off them."""
        left = [d for d in due if d.id not in taken]
        self.conn.execute(
            query("queues", "queue_fair_turns_keep"),
            {"queue": self.queue, "read_at": self.read_at, "ids": [d.id for d in left],
             "keys": [d.key for d in left], "suspects": [d.suspect for d in left]},
        )  # fmt: skip
