"""The worker-count hint's rule (app/observability/worker_hint.py), figure by figure."""

from __future__ import annotations

from app.observability.worker_hint import QueueLoad, workers_wanted


def load(**figures: float) -> QueueLoad:
    base: dict[str, float | None] = {
        "starts_per_second": 0.0, "mean_run_seconds": None, "due": 0, "oldest_due_seconds": 0.0,
        "running": 0, "workers": 1, "slots": 100,
    }  # fmt: skip
    base.update(figures)
    return QueueLoad(**base)  # type: ignore[arg-type]


def test_an_idle_queue_wants_no_worker() -> None:
    assert workers_wanted(load(workers=0, slots=0), default_slots=50) == 0
    assert workers_wanted(load(), default_slots=50) == 0


def test_steady_work_wants_its_busy_slots_at_seventy_percent() -> None:
    # The design's steady day: 580 starts a second of 2 s runs keep 1,160 slots busy.
    steady = load(starts_per_second=580, mean_run_seconds=2.0, running=1160, workers=14,
                  slots=14_000)  # fmt: skip
    assert workers_wanted(steady, default_slots=50) == 2  # 1,160 / (1,000 x 0.7) = 1.66
    # Its peak, ten times the starts: 11,600 busy slots.
    assert workers_wanted(load(starts_per_second=5800, mean_run_seconds=2.0, workers=14,
                               slots=14_000), default_slots=50) == 17  # fmt: skip


def test_a_backlog_of_due_runs_asks_for_what_clears_it_within_a_minute() -> None:
    # 6,000 due runs of 10 s: 1,000 busy slots for a minute, on 100-slot workers.
    backlog = load(due=6000, mean_run_seconds=10.0, workers=1, slots=100)
    assert workers_wanted(backlog, default_slots=50) == 15  # 1,000 / 70 = 14.3


def test_the_slots_busy_now_are_a_floor() -> None:
    # Long runs that have not ended in the window: nothing to size by but what runs now.
    assert workers_wanted(load(running=100, workers=2, slots=100), default_slots=50) == 2


def test_waiting_work_with_no_history_wants_one_worker() -> None:
    assert workers_wanted(load(due=1, workers=0, slots=0), default_slots=50) == 1


def test_a_queue_without_live_workers_is_sized_by_the_default_concurrency() -> None:
    cold = load(starts_per_second=100, mean_run_seconds=1.0, workers=0, slots=0)
    assert workers_wanted(cold, default_slots=50) == 3  # 100 / 35 = 2.9


def test_lag_on_busy_slots_asks_for_one_more_worker_than_are_live() -> None:
    lagging = load(starts_per_second=10, mean_run_seconds=1.0, due=5, oldest_due_seconds=4.0,
                   running=95, workers=3, slots=100)  # fmt: skip
    assert workers_wanted(lagging, default_slots=50) == 4
    # The same busy slots keeping up (no lag): the workers live are enough.
    keeping_up = load(starts_per_second=10, mean_run_seconds=1.0, running=95, workers=3,
                      slots=100)  # fmt: skip
    assert workers_wanted(keeping_up, default_slots=50) == 3


def test_lag_on_idle_slots_asks_for_nothing_more() -> None:
    # Slots free and runs still waiting: the workers are not short (a limit, a paused
    # breaker, the database), so more of them would not help.
    held = load(due=500, oldest_due_seconds=30.0, running=10, workers=3, slots=300)
    assert workers_wanted(held, default_slots=50) == 1
