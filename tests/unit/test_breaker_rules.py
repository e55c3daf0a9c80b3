"""The circuit breaker's rules alone: when a breaker opens, lets trial runs go, closes or
opens again, and when a retry budget is spent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.runs.breaker_rules import BreakerState, Seen, next_change, retries_held

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


def _seen(state: BreakerState = CLOSED, **kw: object) -> Seen:
    given: dict[str, object] = {"manual": False, "failure_threshold": 0.5, "min_calls": 4,
                                "reopen_at": None, **kw}  # fmt: skip
    return Seen(state, **given)  # type: ignore[arg-type]


def test_a_closed_breaker_opens_at_its_threshold_once_enough_calls_ended() -> None:
    assert next_change(_seen(calls=3, failures=3), NOW) is None  # too few to judge
    opened = next_change(_seen(calls=4, failures=2), NOW)
    assert opened is not None and opened.to is OPEN
    assert opened.reason == "2 of its last 4 calls failed"
    assert next_change(_seen(calls=5, failures=2), NOW) is None  # 40 % < 50 %
    assert next_change(_seen(calls=10, failures=10, failure_threshold=1.0), NOW) is not None
    assert next_change(_seen(calls=10, failures=9, failure_threshold=1.0), NOW) is None


def test_an_open_breaker_lets_trial_runs_go_after_its_cool_off() -> None:
    later = NOW + timedelta(seconds=30)
    assert next_change(_seen(OPEN, reopen_at=later), NOW) is None
    half = next_change(_seen(OPEN, reopen_at=later), later)
    assert half is not None and half.to is HALF_OPEN
    assert next_change(_seen(OPEN, reopen_at=None, manual=True), later) is None


def test_a_half_open_breaker_closes_on_success_and_opens_on_a_failure() -> None:
    assert next_change(_seen(HALF_OPEN, trials_left=2, calls=1), NOW) is None
    closed = next_change(_seen(HALF_OPEN, trials_left=0, calls=3), NOW)
    assert closed is not None and closed.to is CLOSED
    again = next_change(_seen(HALF_OPEN, trials_left=2, calls=1, failures=1), NOW)
    assert again is not None and again.to is OPEN and again.reason == "a trial run's call failed"


def test_a_breaker_opened_or_closed_by_hand_stays() -> None:
    assert next_change(_seen(CLOSED, manual=True, calls=10, failures=10), NOW) is None
    assert next_change(_seen(HALF_OPEN, manual=True, failures=1), NOW) is None


def test_a_retry_budget_holds_retries_at_its_share_of_first_attempts() -> None:
    assert not retries_held(_seen(retries=50, first_calls=10))  # no budget
    budget = {"retry_budget": 0.1}
    assert not retries_held(_seen(retries=2, first_calls=5, **budget))  # the floor: 3
    assert retries_held(_seen(retries=3, first_calls=5, **budget))
    assert not retries_held(_seen(retries=9, first_calls=100, **budget))
    assert retries_held(_seen(retries=10, first_calls=100, **budget))
    assert retries_held(_seen(retries=3, first_calls=0, retry_budget=0.0))
