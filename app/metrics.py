"""Prometheus metrics of this process.

Counters live in the process that does the work (worker, reaper, trigger); the web
process's `/metrics` adds what the database knows (depths, lag, terminal counts).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

TRANSITIONS = Counter(
    "sundial_run_transitions_total",
    "Run state transitions this process made, by transition.",
    ["transition"],
)
FENCE_LOST = Counter(
    "sundial_fence_lost_total",
    "Transitions that changed 0 rows because another actor had moved the run first.",
    ["transition"],
)
LEASE_EXPIRIES = Counter(
    "sundial_lease_expiries_total",
    "Runs whose lease expired and that the reaper re-queued or ended.",
    ["outcome"],
)
WORKER_LOOP_LAG = Gauge(
    "sundial_worker_loop_lag_seconds",
    "How late a call_soon callback ran on this worker's event loop, last sample.",
)
WORKER_IN_FLIGHT = Gauge("sundial_worker_in_flight", "Runs this worker is executing.")
