import random

from app.backoff import Backoff, full_jitter


def test_full_jitter_stays_within_the_exponential_ceiling() -> None:
    rand = random.Random(42)
    for attempt in range(12):
        ceiling = min(300.0, 1.0 * 2**attempt)
        delays = [full_jitter(attempt, 1.0, 300.0, rand) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        # full jitter: spread over the whole range, not clustered at the ceiling
        assert min(delays) < ceiling * 0.2 and max(delays) > ceiling * 0.8


def test_full_jitter_is_capped_for_huge_attempts() -> None:
    assert full_jitter(10_000, 1.0, 60.0) <= 60.0


def test_backoff_grows_then_resets() -> None:
    backoff = Backoff(base=0.1, cap=1.0)
    for _ in range(20):
        assert 0.05 <= backoff.next_delay() <= 1.0
    assert backoff.failures == 20
    backoff.reset()
    assert backoff.failures == 0
