"""Which due runs of a limited queue a claim may start: pure, so every rule is tested alone.

A queue's limits (`app.runs.queues.set_limits`): at most `max_running` of its runs running
at once, at most `key_max_running` per key, and, for a rate per key, at most the starts each
key's bucket holds now (`key_starts`). Given the runs running now by key and the due
runs in claim order (highest priority first, then oldest), `fit` takes them in that order,
passing over a run whose key is at its limit (it stays pending, attempt unspent, and the
runs behind it go ahead), until the claim or the queue is full. A suspect (a run whose
worker died under it before) runs alone, as in the plain claim: the claim takes the runs
ahead of it, and the suspect alone only when it comes first and the worker is not busy.

    fit([Due(1, "acme"), Due(2, "acme"), Due(3, "globex")], {"acme": 0}, limit=10,
        key_max_running=1)   # [1, 3]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple


class Due(NamedTuple):
    """A due run as the limited claim reads it: its id, key (None: it has none) and
    whether it is a suspect. (A tuple: a claim reads a thousand or more of them.)"""

    id: int
    key: str | None
    suspect: bool = False


def fit(
    due: Sequence[Due],
    running: Mapping[str | None, int],
    *,
    limit: int,
    max_running: int | None = None,
    key_max_running: int | None = None,
    key_starts: Mapping[str, int] | None = None,
    busy: bool = False,
) -> list[int]:
    """The ids of `due` to claim, in claim order: at most `limit`, within the limits.
    `running` counts the queue's runs running now by key (None: those without one);
    `key_starts`, for a rate per key, how many runs of each key may start now."""
    room = limit_room(running, limit=limit, max_running=max_running)
    held = dict(running)
    started: dict[str, int] = {}
    taken: list[int] = []
    for run in due:
        if len(taken) >= room:
            break
        if run.key is not None:
            if key_max_running is not None and held.get(run.key, 0) >= key_max_running:
                continue
            if key_starts is not None and started.get(run.key, 0) >= key_starts[run.key]:
                continue
        if run.suspect:
            return [run.id] if not taken and not busy else taken
        taken.append(run.id)
        held[run.key] = held.get(run.key, 0) + 1
        if run.key is not None:
            started[run.key] = started.get(run.key, 0) + 1
    return taken


def limit_room(running: Mapping[str | None, int], *, limit: int, max_running: int | None) -> int:
    """How many runs a claim of at most `limit` may start within the queue's `max_running`."""
    if max_running is None:
        return limit
    return min(limit, max_running - sum(running.values()))


def full_keys(running: Mapping[str | None, int], key_max_running: int | None) -> list[str]:
    """The keys at their limit: the read of due runs passes over theirs."""
    if key_max_running is None:
        return []
    return [key for key, n in running.items() if key is not None and n >= key_max_running]
