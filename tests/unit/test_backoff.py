import random

from app.core.backoff import Backoff, full_jitter


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


def test_full_jitter_defaults_start_at_one_second_and_cap_at_five_minutes() -> None:
    rand = random.Random(7)
    first = [full_jitter(0, rand=rand) for _ in range(2000)]
    assert max(first) <= 1.0 and max(first) > 0.99
    late = [full_jitter(30, rand=rand) for _ in range(2000)]
    assert max(late) <= 300.0 and max(late) > 299.0


def test_a_negative_attempt_counts_as_the_first() -> None:
    rand = random.Random(3)
    delays = [full_jitter(-3, 1.0, 300.0, rand) for _ in range(500)]
    assert max(delays) <= 1.0 and max(delays) > 0.9


def test_backoff_grows_then_resets() -> None:
    backoff = Backoff(base=0.1, cap=1.0)
    for _ in range(20):
        assert 0.05 <= backoff.next_delay() <= 1.0
    assert backoff.failures == 20
    backoff.reset()
    assert backoff.failures == 0


def test_backoff_defaults_grow_from_a_fifth_of_a_second_to_ten_seconds() -> None:
    random.seed(11)  # Backoff draws from the module-level generator
    first = [Backoff().next_delay() for _ in range(500)]
    # the first delay: at least half the base (never a busy loop), at most the base
    assert all(0.1 <= d <= 0.2 for d in first)
    assert min(first) < 0.11
    backoff = Backoff()
    early = [backoff.next_delay() for _ in range(3)]
    late = [backoff.next_delay() for _ in range(500)]
    assert max(early) <= 0.8  # ceilings 0.2, 0.4, 0.8
    assert all(0.1 <= d <= 10.0 for d in late)
    assert max(late) > 9.9
    backoff.reset()
    assert backoff.next_delay() <= 0.2
