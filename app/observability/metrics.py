"""Prometheus metrics of this process.

Counters count what this process did (`app.runs.counters`). Workers report their load (in flight,
loop lag, pool saturation, lost fences) in the `workers` table instead, which every web process can
read; the web's `/metrics` adds what the database knows (depths, lag, terminal counts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from app.core.db import Conn
from app.core.sql import query
from app.observability import lag_slo, worker_hint
from app.runs import breakers
from app.runs.breaker_rules import BreakerState
from app.runs.breakers import Breaker

# ---- the fleet's figures, read from the database for the web's /metrics ---------------------

# Schedule lag (started_at - run_at) and attempts per run: histogram bucket bounds.
LAG_BOUNDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
ATTEMPT_BOUNDS = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 100.0)
WORKER_LIVE_SECONDS = 60.0
BOUND_EPSILON = 1e-9


def read_fleet(
    conn: Conn, window_seconds: float, now: datetime | None = None, *, default_slots: int = 1
) -> bytes:
    """The fleet's figures in Prometheus text format, from cheap indexed reads (see
    app/core/sql/metrics.sql): the same on every web process, whichever did the work.
    `default_slots`: a worker's concurrency when none is live to say (the setting's)."""
    registry = CollectorRegistry(auto_describe=False)
    reading = _read(conn, window_seconds, now)
    registry.register(_Fleet(reading, window_seconds, default_slots))
    return generate_latest(registry)


@dataclass
class _Reading:
    pending: list[dict[str, Any]]
    running: int
    blocked: int
    finished: list[dict[str, Any]]
    expired: int
    requeued: int
    fires: list[dict[str, Any]]
    leaders: list[dict[str, Any]]
    workers: list[dict[str, Any]]
    dead_man: int
    paused_queues: list[str]
    queue_limits: list[dict[str, Any]]
    services: list[Breaker]
    queue_work: list[dict[str, Any]]


def _read(conn: Conn, window_seconds: float, now: datetime | None) -> _Reading:
    window = {"now": now, "window_seconds": window_seconds}

    def one(name: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        row = conn.execute(query("metrics", name), params or {}).fetchone()
        assert row is not None
        return row

    def rows(name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return conn.execute(query("metrics", name), params).fetchall()

    counts = one("metrics_counts", {"now": now})
    return _Reading(
        pending=rows("metrics_pending", {"now": now}),
        paused_queues=[r["name"] for r in rows("metrics_paused_queues", {})],
        queue_limits=rows("metrics_queue_limits", {}),
        services=breakers.overview(conn, now),
        running=counts["running"],
        blocked=counts["blocked"],
        finished=rows(
            "metrics_finished_recent",
            {**window, "lag_bounds": _upper(LAG_BOUNDS), "attempt_bounds": _upper(ATTEMPT_BOUNDS)},
        ),
        expired=counts["expired"],
        requeued=counts["requeued"],
        fires=rows("metrics_fires_recent", window),
        leaders=rows("metrics_leaders", {"now": now}),
        workers=rows("metrics_workers", {"now": now, "live_seconds": WORKER_LIVE_SECONDS}),
        dead_man=lag_slo.dead_man_firing(conn, now=counts["now"]),
        queue_work=rows("metrics_queue_work", window),
    )


def _upper(bounds: tuple[float, ...]) -> list[float]:
    """Bounds for width_bucket, which puts a value equal to a bound above it; Prometheus
    buckets hold values up to and including their bound (`le`)."""
    return [b + BOUND_EPSILON for b in bounds]


def _buckets(counts: dict[int, int], bounds: tuple[float, ...]) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs from width_bucket numbers (0: below the first bound)."""
    out: list[tuple[str, float]] = []
    running = 0
    for index, bound in enumerate(bounds):
        running += counts.get(index, 0)  # bucket `index` holds values below bounds[index]
        out.append((repr(bound), running))
    out.append(("+Inf", sum(counts.values())))
    return out


class _Fleet(Collector):
    def __init__(self, reading: _Reading, window_seconds: float, default_slots: int) -> None:
        self.r = reading
        self.window = f"{window_seconds:g}s"
        self.window_seconds = window_seconds
        self.default_slots = default_slots

    def collect(self) -> Iterator[Metric]:
        r = self.r
        yield from self._queue(r)
        yield from self._services(r)
        yield from self._finished(r)
        expiries = CounterMetricFamily(
            "sundial_lease_expiries",
            "Attempts whose lease expired (the reaper recorded them lost), from the history.",
        )
        expiries.add_metric([], r.expired)
        yield expiries
        requeues = CounterMetricFamily(
            "sundial_reaper_requeues",
            "Lease expiries after which the reaper put the run back in the queue.",
        )
        requeues.add_metric([], r.requeued)
        yield requeues
        fires = GaugeMetricFamily(
            "sundial_schedule_fires_recent",
            f"Schedule fires in the last {self.window} by outcome (enqueued, skipped_overlap, "
            "paused, missed, ...).",
            labels=["outcome"],
        )
        for row in r.fires:
            fires.add_metric([row["outcome"]], row["n"])
        yield fires
        term = GaugeMetricFamily(
            "sundial_leader_term",
            "The term of each singleton role's leader lease.",
            labels=["role"],
        )
        held = GaugeMetricFamily(
            "sundial_leader_held", "1 while someone holds the role's lease.", labels=["role"]
        )
        for row in r.leaders:
            term.add_metric([row["name"]], row["term"])
            held.add_metric([row["name"]], 1 if row["held"] else 0)
        yield term
        yield held
        dead_man = GaugeMetricFamily(
            "sundial_dead_man_alerts_firing",
            "Schedules whose expected fire produced no run (overdue, or a gap in the fire "
            "ledger of a schedule with a lag threshold): the Lag SLO page's alerts.",
        )
        dead_man.add_metric([], r.dead_man)
        yield dead_man
        yield from self._workers(r)
        yield self._workers_wanted(r)

    def _queue(self, r: _Reading) -> Iterator[Metric]:
        by_priority: dict[int, int] = defaultdict(int)
        by_queue: dict[str, int] = defaultdict(int)
        waited: dict[str, float] = defaultdict(float)  # per queue, the oldest due run's wait
        for row in r.pending:
            by_priority[row["priority"]] += row["n"]
            by_queue[row["queue"]] += row["n"]
            if row["oldest_due"] is not None:
                wait = (row["now"] - row["oldest_due"]).total_seconds()
                waited[row["queue"]] = max(waited[row["queue"]], wait)
        depth = GaugeMetricFamily(
            "sundial_pending_runs", "Pending runs by priority (the queue).", labels=["priority"]
        )
        for priority, n in sorted(by_priority.items()):
            depth.add_metric([str(priority)], n)
        yield depth
        age = GaugeMetricFamily(
            "sundial_oldest_due_run_age_seconds",
            "How long the oldest due pending run has waited past its run_at (0: none due).",
        )
        age.add_metric([], max(waited.values(), default=0.0))
        yield age
        queued = GaugeMetricFamily(
            "sundial_queue_pending_runs", "Pending runs by named queue.", labels=["queue"]
        )
        queue_age = GaugeMetricFamily(
            "sundial_queue_oldest_due_age_seconds",
            "How long each queue's oldest due run has waited past its run_at (0: none due).",
            labels=["queue"],
        )
        for name in sorted(by_queue):
            queued.add_metric([name], by_queue[name])
            queue_age.add_metric([name], waited.get(name, 0.0))
        yield queued
        yield queue_age
        paused = GaugeMetricFamily(
            "sundial_queue_paused", "1 for each queue paused now.", labels=["queue"]
        )
        for name in sorted(r.paused_queues):
            paused.add_metric([name], 1)
        yield paused
        limit = GaugeMetricFamily(
            "sundial_queue_concurrency_limit",
            "Each queue's concurrency limits: scope queue (runs at once in the queue) or key "
            "(runs at once per value of the args field `key`).",
            labels=["queue", "scope", "key"],
        )
        for q in sorted(r.queue_limits, key=lambda q: q["name"]):
            if q["max_running"] is not None:
                limit.add_metric([q["name"], "queue", ""], q["max_running"])
            if q["key_max_running"] is not None:
                limit.add_metric([q["name"], "key", q["key_field"]], q["key_max_running"])
        yield limit
        rate = GaugeMetricFamily(
            "sundial_queue_rate_limit_per_second",
            "Each rate-limited queue's most starts a second, fleet-wide.",
            labels=["queue"],
        )
        for q in sorted(r.queue_limits, key=lambda q: q["name"]):
            if q["rate_per_second"] is not None:
                rate.add_metric([q["name"]], q["rate_per_second"])
        yield rate
        active = GaugeMetricFamily(
            "sundial_active_runs", "Runs running or blocked.", labels=["status"]
        )
        active.add_metric(["running"], r.running)
        active.add_metric(["blocked"], r.blocked)
        yield active

    def _services(self, r: _Reading) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "sundial_breaker_state",
            "Each called service's circuit breaker: 0 closed (runs go), 1 half-open (trial "
            "runs go), 2 open (its runs wait).",
            labels=["dependency"],
        )
        held = GaugeMetricFamily(
            "sundial_breaker_retries_held",
            "1 while a service's retry budget is spent (its retries wait).",
            labels=["dependency"],
        )
        calls = GaugeMetricFamily(
            "sundial_breaker_calls", "Calls to each service ended in its window.",
            labels=["dependency"],
        )  # fmt: skip
        failures = GaugeMetricFamily(
            "sundial_breaker_failures", "Of those, how many failed.", labels=["dependency"]
        )
        levels = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}
        for b in r.services:
            state.add_metric([b.name], levels[b.state])
            held.add_metric([b.name], int(b.retries_held))
            calls.add_metric([b.name], b.calls)
            failures.add_metric([b.name], b.failures)
        yield from (state, held, calls, failures)

    def _finished(self, r: _Reading) -> Iterator[Metric]:
        by_job: dict[tuple[str, str], int] = {}
        lag: dict[int, int] = {}
        attempts: dict[int, int] = {}
        lag_sum = attempt_sum = 0.0
        for row in r.finished:
            key = (row["handler"], row["status"])
            by_job[key] = by_job.get(key, 0) + row["n"]
            if row["started"]:
                lag[row["lag_bucket"]] = lag.get(row["lag_bucket"], 0) + row["n"]
                lag_sum += row["lag_sum"]
            if row["status"] == "completed":
                attempts[row["attempt_bucket"]] = attempts.get(row["attempt_bucket"], 0) + row["n"]
                attempt_sum += float(row["attempt_sum"])
        finished = GaugeMetricFamily(
            "sundial_runs_finished_recent",
            f"Runs that ended in the last {self.window}, by job (handler) and terminal status.",
            labels=["job", "status"],
        )
        for (job, status), n in sorted(by_job.items()):
            finished.add_metric([job, status], n)
        yield finished
        yield _histogram(
            "sundial_schedule_lag_seconds",
            f"started_at - run_at of runs that ended in the last {self.window}.",
            lag,
            LAG_BOUNDS,
            lag_sum,
        )
        yield _histogram(
            "sundial_attempts_per_completed_run",
            f"Attempts of runs completed in the last {self.window}.",
            attempts,
            ATTEMPT_BOUNDS,
            attempt_sum,
        )

    def _workers(self, r: _Reading) -> Iterator[Metric]:
        live = [w for w in r.workers if w["live"]]
        count = GaugeMetricFamily("sundial_workers_live", "Workers heartbeating and not stopped.")
        count.add_metric([], len(live))
        yield count
        lag = GaugeMetricFamily(
            "sundial_worker_loop_lag_seconds",
            "How long a call_soon callback waited on each live worker's event loop.",
            labels=["worker"],
        )
        busy = GaugeMetricFamily(
            "sundial_worker_pool_busy",
            "Busy slots of each live worker's pools (threads include leaked ones).",
            labels=["worker", "pool"],
        )
        size = GaugeMetricFamily(
            "sundial_worker_pool_size",
            "Slots of each live worker's pools.",
            labels=["worker", "pool"],
        )
        in_flight = GaugeMetricFamily(
            "sundial_worker_in_flight", "Runs each live worker is executing.", labels=["worker"]
        )
        for w in live:
            stats = w["stats"] or {}
            lag.add_metric([w["id"]], float(stats.get("loop_lag_ms", 0)) / 1000)
            in_flight.add_metric([w["id"]], float(stats.get("in_flight", 0)))
            for pool in ("threads", "processes"):
                busy.add_metric([w["id"], pool], float(stats.get(f"{pool}_busy", 0)))
                size.add_metric([w["id"], pool], float(stats.get(f"{pool}_total", 0)))
        yield lag
        yield in_flight
        yield busy
        yield size
        stale = CounterMetricFamily(
            "sundial_stale_finishes_discarded",
            "Finishes workers discarded because the run had moved on (lease lost, reaped, "
            "cancelled), as the workers reported them.",
        )
        stale.add_metric([], sum(int((w["stats"] or {}).get("lost", 0)) for w in r.workers))
        yield stale

    def _workers_wanted(self, r: _Reading) -> Metric:
        wanted = GaugeMetricFamily(
            "sundial_workers_wanted",
            "Worker processes each queue wants, for an autoscaler: enough slots for its "
            f"starts a second and its due backlog at {worker_hint.TARGET_BUSY:.0%} busy, and "
            "one more than are live while its oldest due run waits past "
            f"{worker_hint.LAG_TARGET_SECONDS:g} s on nearly busy slots (docs/operations.md).",
            labels=["queue"],
        )
        for queue, load in sorted(_queue_loads(r, self.window_seconds).items()):
            wanted.add_metric(
                [queue], worker_hint.workers_wanted(load, default_slots=self.default_slots)
            )
        return wanted


def _queue_loads(r: _Reading, window_seconds: float) -> dict[str, worker_hint.QueueLoad]:
    """Each queue with due or recent work or live workers: its figures for the hint."""
    due: dict[str, int] = defaultdict(int)
    waited: dict[str, float] = defaultdict(float)
    for row in r.pending:
        due[row["queue"]] += row["due"]
        if row["oldest_due"] is not None:
            wait = (row["now"] - row["oldest_due"]).total_seconds()
            waited[row["queue"]] = max(waited[row["queue"]], wait)
    workers: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for w in r.workers:
        if w["live"]:
            workers[(w["stats"] or {}).get("queue", "default")].append(w)
    work = {row["queue"]: row for row in r.queue_work}
    loads = {}
    for queue in set(due) | set(workers) | set(work):
        ended = work.get(queue)
        serving = workers.get(queue, [])
        loads[queue] = worker_hint.QueueLoad(
            starts_per_second=ended["n"] / window_seconds if ended else 0.0,
            mean_run_seconds=ended["run_seconds"] / ended["n"] if ended else None,
            due=due.get(queue, 0),
            oldest_due_seconds=waited.get(queue, 0.0),
            running=sum(int((w["stats"] or {}).get("in_flight", 0)) for w in serving),
            workers=len(serving),
            slots=sum(w["concurrency"] or 0 for w in serving),
        )
    return loads


def _histogram(
    name: str, documentation: str, counts: dict[int, int], bounds: tuple[float, ...], total: float
) -> Metric:
    family = HistogramMetricFamily(name, documentation)
    family.add_metric([], _buckets(counts, bounds), sum_value=total)
    return family
