"""How many worker processes each queue wants: the design's "autoscale workers on schedule
lag" as one number an autoscaler can follow (`sundial_workers_wanted{queue}` on /metrics).

The rule, per queue, from what /metrics already reads (docs/operations.md explains it):

    busy slots needed = starts a second x mean run time        (Little's law: keeping up)
                      + due runs x mean run time / CATCH_UP    (clearing the backlog)
    workers wanted    = ceil(busy slots needed / (slots per worker x TARGET_BUSY)),
                        and never fewer than hold the runs running now

and schedule lag decides when those figures cannot: while the queue's oldest due run has
waited past LAG_TARGET_SECONDS and its workers' slots are nearly all busy, one more worker
than are live. A queue with due runs and no workers wants one. Pure: tests give figures.

    workers_wanted(QueueLoad(starts_per_second=300, mean_run_seconds=2, due=0,
                             oldest_due_seconds=0, running=580, workers=1, slots=1000),
                   default_slots=50)   # 1: 600 busy slots of 700 a worker may keep busy
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TARGET_BUSY = 0.7  # of a worker's slots kept busy: head-room for a burst before lag grows
CATCH_UP_SECONDS = 60.0  # a backlog of due runs should clear within a minute
LAG_TARGET_SECONDS = 1.0  # the oldest due run's wait past which lag alone asks for more
NEARLY_ALL_BUSY = 0.9  # of the slots, for the lag rule: idle slots mean workers are not short


@dataclass(frozen=True, slots=True)
class QueueLoad:
    """One queue's work and workers, as /metrics reads them."""

    starts_per_second: float  # runs that ended within the window having started, a second
    mean_run_seconds: float | None  # their mean run time (None: none ended)
    due: int  # pending runs due now
    oldest_due_seconds: float  # how long the oldest due run has waited past its run_at
    running: int  # runs its live workers are executing
    workers: int  # live workers serving it
    slots: int  # their slots (concurrency), together


def workers_wanted(load: QueueLoad, *, default_slots: int) -> int:
    """The worker processes `load`'s queue wants (`default_slots` a worker when none is
    live to say)."""
    per_worker = load.slots / load.workers if load.workers and load.slots else default_slots
    run_seconds = load.mean_run_seconds or 0.0
    needed = load.starts_per_second * run_seconds + load.due * run_seconds / CATCH_UP_SECONDS
    wanted = max(
        math.ceil(needed / (per_worker * TARGET_BUSY)),
        math.ceil(load.running / per_worker),  # long runs that have not ended in the window
    )
    if load.due and wanted == 0:
        wanted = 1  # work waiting and nothing yet to size the fleet by
    short = (
        load.workers > 0
        and load.oldest_due_seconds > LAG_TARGET_SECONDS
        and load.running >= NEARLY_ALL_BUSY * load.slots
    )
    if short:
        wanted = max(wanted, load.workers + 1)
    return wanted
