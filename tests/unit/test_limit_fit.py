"""What a limited queue's claim takes, rule by rule (`app.runs.limit_fit`)."""

from __future__ import annotations

import pytest

from app.runs.limit_fit import Due, fit, full_keys


def due(*keys: str | None, suspect_at: int | None = None) -> list[Due]:
    return [Due(i, key, i == suspect_at) for i, key in enumerate(keys, 1)]


def test_no_limits_take_the_claims_size_in_order() -> None:
    assert fit(due("a", "a", None, "b"), {}, limit=3) == [1, 2, 3]
    assert fit(due("a", "a"), {}, limit=5) == [1, 2]
    assert fit([], {}, limit=5) == []


def test_a_key_limit_passes_over_a_full_key_and_takes_the_runs_behind() -> None:
    runs = due("a", "a", "b", "a", "c", None, None)
    assert fit(runs, {}, limit=10, key_max_running=1) == [1, 3, 5, 6, 7]
    assert fit(runs, {"a": 1}, limit=10, key_max_running=1) == [3, 5, 6, 7]
    assert fit(runs, {"a": 1, "b": 2}, limit=10, key_max_running=2) == [1, 5, 6, 7]
    assert fit(runs, {"a": 0}, limit=10, key_max_running=3) == [1, 2, 3, 4, 5, 6, 7]
    assert fit(due("a", "a", "a"), {}, limit=10, key_max_running=2) == [1, 2]


def test_runs_without_a_key_count_only_towards_the_queue_limit() -> None:
    runs = due(None, None, None)
    assert fit(runs, {None: 5}, limit=10, key_max_running=1) == [1, 2, 3]
    assert fit(runs, {None: 5}, limit=10, max_running=7) == [1, 2]


@pytest.mark.parametrize(
    ("running", "max_running", "taken"),
    [
        ({}, 2, [1, 2]),
        ({"x": 1}, 2, [1]),
        ({"x": 1, None: 1}, 2, []),
        ({"x": 3}, 2, []),  # over it already (a limit lowered): nothing, never negative
        ({}, 10, [1, 2, 3, 4]),  # the claim's own size is the smaller
    ],
)
def test_the_queue_limit_counts_every_run_running(
    running: dict[str | None, int], max_running: int, taken: list[int]
) -> None:
    assert fit(due("a", "b", "c", "d", "e"), running, limit=4, max_running=max_running) == taken


def test_both_limits_hold_together() -> None:
    runs = due("a", "a", "b", "c", "d")
    assert fit(runs, {}, limit=10, max_running=3, key_max_running=1) == [1, 3, 4]


def test_a_suspect_runs_alone_and_keeps_its_place_in_line() -> None:
    assert fit(due("a", "b", "c", suspect_at=3), {}, limit=10) == [1, 2]
    assert fit(due("a", "b", suspect_at=1), {}, limit=10) == [1]
    assert fit(due("a", "b", suspect_at=1), {}, limit=10, busy=True) == []
    # a suspect over its key's limit is passed over like any run
    runs = due("a", "b", suspect_at=1)
    assert fit(runs, {"a": 1}, limit=10, key_max_running=1) == [2]


def test_the_keys_at_their_limit() -> None:
    running = {"a": 2, "b": 1, None: 9}
    assert sorted(full_keys(running, 1)) == ["a", "b"]
    assert full_keys(running, 2) == ["a"]
    assert full_keys(running, 3) == []
    assert full_keys(running, None) == []


def test_a_rate_per_key_lets_each_key_start_what_its_bucket_holds() -> None:
    runs = due("a", "a", "b", "b", "b", None, "c")
    starts = {"a": 1, "b": 2, "c": 0}
    assert fit(runs, {}, limit=10, key_starts=starts) == [1, 3, 4, 6]
    # with a key limit too, the tighter one holds
    assert fit(runs, {"b": 1}, limit=10, key_max_running=2, key_starts=starts) == [1, 3, 6]
