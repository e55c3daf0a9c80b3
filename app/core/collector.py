"""The cyclic garbage collector in the long-running processes (web, worker).

What start-up made (modules, classes, routes, handlers) lives as long as the process, yet
every full collection walks it: tens of milliseconds now and then, a latency tail for a
worker's runs and a web page's p95. Those objects are frozen out of the collector, and the
youngest generation is collected every YOUNG_THRESHOLD allocations instead of Python's 700:
requests and runs allocate a lot that dies young, and collecting that often moves what is
still in flight to the older generations, to be walked again.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def freeze_start_up() -> None:
    """Keep what exists now out of every later collection."""
    gc.freeze()


def collect_less_often() -> None:
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
