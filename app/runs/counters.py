"""Prometheus counters of what this process did to runs: transitions, lost fences, expired
leases. The run modules count as they move runs; `/metrics` and each worker's exporter
publish them (the fleet's figures read from the database are `app.observability.metrics`).
"""

from __future__ import annotations

from prometheus_client import Counter

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
