"""A queue's rate per key: each key (the value of the runs' args field `key_field`) has a
bucket of starts of its own, a row of `queue_key_rates`, read and spent in the limited
claim's turn (`app.runs.transitions`). A key without a row has a full bucket; the reaper
drops rows that have refilled (`app.runs.queues.prune_key_rates`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from app.core.db import Conn
from app.core.sql import query
from app.runs import queue_limits
from app.runs.limit_fit import Due


class KeyRates:
    """A limited claim's rate per key: the keys whose buckets are empty, the starts each
    candidate key may make, and what the keys that started runs have left."""

    def __init__(self, conn: Conn, setting: Mapping[str, Any]) -> None:
        self.conn, self.queue, self.clock = conn, setting["name"], setting["clock"]
        self.burst = float(setting["rate_burst"])
        self.tokens: dict[str, float] = {}
        # the worker looks again when a key's next start may be due
        per_second = setting["rate_limit"] / setting["rate_period_seconds"]
        queue_limits.rate_bucket_left(self.queue, 0.0, per_second)

    def starved(self) -> list[str]:
        rows = self.conn.execute(
            query("queues", "queue_key_rates_starved"), {"queue": self.queue, "clock": self.clock}
        )
        return [r["key"] for r in rows]

    def starts_for(self, due: Sequence[Due]) -> dict[str, int]:
        keys = sorted({d.key for d in due if d.key is not None})
        read = {"queue": self.queue, "clock": self.clock, "keys": keys}
        self.tokens = dict.fromkeys(keys, self.burst)
        self.tokens.update(
            (r["key"], r["tokens"])
            for r in self.conn.execute(query("queues", "queue_key_rates_of"), read)
        )
        return {key: math.floor(left) for key, left in self.tokens.items()}

    def spend(self, due: Sequence[Due], claimed: set[int]) -> None:
        left = dict(self.tokens)
        for d in due:
            if d.id in claimed and d.key is not None:
                left[d.key] -= 1
        spent = {k: v for k, v in left.items() if v != self.tokens[k]}
        if spent:
            self.conn.execute(
                query("queues", "queue_key_rates_spend"),
                {"queue": self.queue, "clock": self.clock, "keys": list(spent),
                 "tokens": list(spent.values())},
            )  # fmt: skip
