"""Prometheus metrics of this process.

Counters count what this process did. Workers report their load (in flight, loop lag,
pool saturation, lost fences) in the `workers` table instead, which every web process can
read; the web's `/metrics` adds what the database knows (depths, lag, terminal counts).
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
