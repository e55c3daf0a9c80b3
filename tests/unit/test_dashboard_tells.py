"""A worker tells the dashboard that runs changed at most every interval, and owes a tell
for what its statements did not say until the interval is up."""

from __future__ import annotations

from app.services.dashboard_tells import DashboardTells


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_change_tells_at_once_and_the_next_ones_within_the_interval_wait() -> None:
    clock = Clock()
    tells = DashboardTells(0.25, clock)
    assert tells.take() is True
    assert tells.owed_in() is None  # told: nothing owed
    clock.now += 0.1
    assert tells.take() is False  # too soon: the statement stays quiet...
    owed = tells.owed_in()
    assert owed is not None and abs(owed - 0.15) < 1e-9
    assert tells.take_owed() is False  # ...and the tell is owed until the interval is up
    clock.now += 0.15
    assert tells.owed_in() == 0.0
    assert tells.take_owed() is True
    assert tells.take_owed() is False  # told once
    assert tells.owed_in() is None


def test_a_statement_past_the_interval_carries_the_owed_tell() -> None:
    clock = Clock()
    tells = DashboardTells(0.25, clock)
    tells.take()
    clock.now += 0.05
    assert tells.take() is False
    clock.now += 0.3
    assert tells.take() is True  # it tells, so nothing is owed any more
    assert tells.owed_in() is None
    assert tells.take_owed() is False


def test_a_stopping_worker_tells_what_it_owes_at_once() -> None:
    clock = Clock()
    tells = DashboardTells(0.25, clock)
    tells.take()
    assert tells.take() is False
    assert tells.take_owed(now_or_never=True) is True
    assert tells.take_owed(now_or_never=True) is False  # nothing owed: nothing to tell
